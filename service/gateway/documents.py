"""A `PageResult` as Firecrawl's document: the formats asked, camelCase metadata. Pure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from service.contracts import PageMetadata, PageResult
    from service.gateway.options import ScrapeChoices

BASE64_IMAGE: Final = re.compile(r"!\[[^\]]*\]\(data:image/[^)]*\)")
"""A Markdown image whose source is inline base64 data (`removeBase64Images`)."""

SCREENSHOT_PREFIX: Final = "data:image/png;base64,"
"""Firecrawl's self-hosted screenshots are data URLs (its cloud uploads them instead)."""


def document(result: PageResult, choices: ScrapeChoices) -> dict[str, Any]:
    """The document of one result, with the formats of `choices` and the metadata."""
    out: dict[str, Any] = {}
    for name in choices.formats:
        value = _format(result, name, choices)
        if value is not None:
            out[name] = value
    out["metadata"] = metadata(result)
    if choices.warning:
        out["warning"] = choices.warning
    return out


def metadata(result: PageResult) -> dict[str, Any]:
    """Firecrawl's `metadata`: the page's own, plus where it came from and how it went."""
    out: dict[str, Any] = _page_metadata(result.metadata) if result.metadata else {}
    if result.title and "title" not in out:
        out["title"] = result.title
    out |= {
        "sourceURL": result.url,
        "url": result.final_url or result.url,
        "statusCode": result.status_code or 0,
        "scrapeId": result.result_id,
        "proxyUsed": "basic",
        "cacheState": "miss",
    }
    if result.error is not None:
        out["error"] = f"{result.error.code.value}: {result.error.message}"
    return out


def _page_metadata(page: PageMetadata) -> dict[str, Any]:
    out: dict[str, Any] = {
        key: value
        for key, value in (
            ("title", page.title),
            ("description", page.description),
            ("language", page.language),
        )
        if value
    }
    for key, value in page.open_graph.items():
        out[f"og{key[:1].upper()}{key[1:]}"] = value
    return out


def _format(result: PageResult, name: str, choices: ScrapeChoices) -> str | list[str] | None:
    if name == "markdown":
        text = result.markdown or ""
        return BASE64_IMAGE.sub("", text) if choices.remove_base64_images else text
    if name in {"html", "rawHtml"}:
        return result.html or ""
    if name == "links":
        links = result.links
        return [*links.internal, *links.external] if links else []
    if name == "screenshot" and result.screenshot:
        return SCREENSHOT_PREFIX + result.screenshot
    return None
