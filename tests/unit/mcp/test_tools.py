"""The tools against an in-memory stand-in of the v2 API (a Starlette app behind the same ASGI
transport): arguments become the request, answers become text and a structured copy, long ones
are cut with a continuation that gives back everything once, failures are tool errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from service.mcp._api import V2Api
from service.mcp._calls import Call
from service.mcp._render import TEXT_BUDGET_CHARS
from service.mcp.server import run_tool

if TYPE_CHECKING:
    from starlette.requests import Request

AUTH = "Bearer fc-unit"
LONG = "".join(f"Paragraph {n}: " + "word " * 30 + "\n\n" for n in range(1200))
PAGE = [
    {"markdown": f"# Doc {n}\n\n" + "text " * 4000, "metadata": {"sourceURL": f"http://s/{n}"}}
    for n in range(12)
]


async def _scrape(request: Request) -> JSONResponse:
    body = await request.json()
    if request.headers.get("authorization") != AUTH:
        return JSONResponse({"success": False, "error": "Unauthorized"}, status_code=401)
    if body.get("proxy") == "stealth":
        return JSONResponse(
            {"success": False, "error": "Bad Request: proxy: not here"}, status_code=400
        )
    metadata = {"sourceURL": body["url"], "statusCode": 200, "keys": sorted(body)}
    return JSONResponse({"success": True, "data": {"markdown": LONG, "metadata": metadata}})


async def _crawl(_: Request) -> JSONResponse:
    return JSONResponse(
        {"success": False, "error": "Rate limit exceeded: 1 jobs running, the limit is 1"},
        status_code=429,
        headers={"Retry-After": "5"},
    )


async def _status(request: Request) -> JSONResponse:
    """Two gateway pages: documents 0-5 (next: cursor p2), then 6-11 (no next)."""
    second = request.query_params.get("cursor") == "p2"
    data = PAGE[6:] if second else PAGE[:6]
    following = None if second else "http://gateway/v2/crawl/j1?cursor=p2"
    answer = {"success": True, "status": "completed", "total": 12, "completed": 12}
    return JSONResponse(answer | {"next": following, "data": data})


async def _broken(_: Request) -> JSONResponse:
    raise RuntimeError("a bug in a route")


APP = Starlette(
    routes=[
        Route("/v2/map", _broken, methods=["POST"]),
        Route("/v2/scrape", _scrape, methods=["POST"]),
        Route("/v2/crawl", _crawl, methods=["POST"]),
        Route("/v2/crawl/{job_id}", _status, methods=["GET"]),
    ]
)


async def _run(name: str, **arguments: Any) -> Any:
    api = V2Api(APP, wait_s=5)
    try:
        return await run_tool(Call(api=api, authorization=AUTH), name, arguments)
    finally:
        await api.aclose()


async def test_a_long_page_is_cut_and_offset_gives_back_the_rest():
    first = await _run("firecrawl_scrape", url="http://s/long")
    text = first.content[0].text
    assert len(text) < TEXT_BUDGET_CHARS + 500
    assert first.structured_content["nextOffset"] is not None
    assert f"offset={first.structured_content['nextOffset']}" in text
    pieces, offset = [first.structured_content["content"]], first.structured_content["nextOffset"]
    while offset is not None:
        more = await _run("firecrawl_scrape", url="http://s/long", offset=offset)
        pieces.append(more.structured_content["content"])
        offset = more.structured_content["nextOffset"]
    assert "".join(pieces).startswith(LONG)


async def test_the_tool_own_arguments_stay_out_of_the_request_body():
    answer = await _run("firecrawl_scrape", url="http://s/x", offset=0, onlyMainContent=False)
    assert not answer.is_error
    assert answer.structured_content["metadata"]["keys"] == ["onlyMainContent", "url"]


async def test_a_refusal_is_a_tool_error_with_firecrawl_message():
    answer = await _run("firecrawl_scrape", url="http://s/x", proxy="stealth")
    assert answer.is_error
    assert answer.content[0].text == "Bad Request: proxy: not here"


async def test_a_429_says_when_to_try_again():
    answer = await _run("firecrawl_crawl", url="http://s/")
    assert answer.is_error
    assert "Rate limit exceeded" in answer.content[0].text
    assert "retry after 5 s" in answer.content[0].text


async def test_a_route_that_fails_unexpectedly_is_a_tool_error_not_a_protocol_error():
    answer = await _run("firecrawl_map", url="http://s/")
    assert answer.is_error
    assert answer.content[0].text == "Internal Server Error"


async def test_batch_options_must_be_an_object():
    answer = await _run("firecrawl_batch_scrape", urls=["http://s/1"], options=["markdown"])
    assert answer.is_error
    assert answer.content[0].text.startswith("options:")


async def test_an_unknown_tool_or_a_bad_offset_is_a_tool_error():
    assert (await _run("firecrawl_search", query="x")).is_error
    assert (await _run("firecrawl_scrape", url="http://s/x", offset=-1)).is_error


async def test_status_pages_through_every_document_once_across_answers_and_gateway_pages():
    seen: list[str] = []
    cursor = None
    for _ in range(20):
        arguments = {"id": "j1"} | ({"cursor": cursor} if cursor else {})
        answer = await _run("firecrawl_check_crawl_status", **arguments)
        assert len(answer.content[0].text) < TEXT_BUDGET_CHARS + 1000
        seen += [doc["metadata"]["sourceURL"] for doc in answer.structured_content["data"]]
        cursor = answer.structured_content["next"]
        if cursor is None:
            break
        assert f'cursor="{cursor}"' in answer.content[0].text
    assert seen == [f"http://s/{n}" for n in range(12)]
