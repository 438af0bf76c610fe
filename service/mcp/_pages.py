"""`firecrawl_scrape` and `firecrawl_map`: one answer each, cut at the text budget with an
`offset` to continue from."""

from __future__ import annotations

from itertools import accumulate
from typing import TYPE_CHECKING, Any

from service.mcp._answer import Answer
from service.mcp._calls import offset_arg, wait_of, without
from service.mcp._render import document_text, window

if TYPE_CHECKING:
    from service.mcp._calls import Call
    from service.mcp._render import Window


async def scrape(call: Call, args: dict[str, Any]) -> Answer:
    offset = offset_arg(args)
    answer = await call.post("/v2/scrape", without(args, "offset"), wait_s=wait_of(args))
    document: dict[str, Any] = answer.get("data") or {}
    cut = window(document_text(document), offset)
    text = cut.text + cut.note("firecrawl_scrape")
    if not cut.cut and offset == 0:
        return Answer(text=text, structured=document)
    return Answer(text=text, structured=_part(cut, metadata=document.get("metadata")))


async def site_map(call: Call, args: dict[str, Any]) -> Answer:
    offset = offset_arg(args)
    answer = await call.post("/v2/map", without(args, "offset"), wait_s=wait_of(args))
    links: list[dict[str, Any]] = answer.get("links") or []
    lines = [_line(link) for link in links]
    starts = [0, *accumulate(len(line) + 1 for line in lines)]
    cut = window("\n".join(lines), offset)
    shown = [link for link, at in zip(links, starts, strict=False) if cut.offset <= at < cut.end]
    head = f"{len(links)} URLs found.\n\n" if offset == 0 else ""
    structured = {"links": shown} | (_part(cut) if cut.cut or offset else {})
    structured.pop("content", None)
    return Answer(text=head + cut.text + cut.note("firecrawl_map"), structured=structured)


def _line(link: dict[str, Any]) -> str:
    title = link.get("title")
    return f"{link.get('url')}  ({title})" if title else str(link.get("url"))


def _part(cut: Window, **more: Any) -> dict[str, Any]:  # noqa: ANN401
    """The structured copy of a cut answer: the part shown and where the rest starts."""
    return {
        "content": cut.text,
        "offset": cut.offset,
        "nextOffset": cut.end if cut.cut else None,
        "totalChars": cut.total,
        **more,
    }
