"""A streamed JSON answer is, joined, exactly what Starlette's `JSONResponse` and
`WebSocket.send_json` would send, cut in chunks of bounded size; a streamed status page sent
through the app's response class arrives chunked and parses to the same content."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from starlette.responses import JSONResponse

from service.gateway.errors import ApiError
from service.gateway.streaming import (
    CHUNK_BYTES,
    MAX_CHUNK_BYTES,
    SLICE_CHARS,
    Streamed,
    StreamedJson,
    chunks,
    encoded,
)

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from starlette.types import Message


def _page(documents: int, markdown: str) -> dict[str, Any]:
    docs = [
        {
            "markdown": markdown,
            "links": [f"https://example.com/{n}/{k}" for k in range(3)],
            "metadata": {"title": f"page {n}", "statusCode": 200, "ogTitle": 'é "x" \\ \n'},
        }
        for n in range(documents)
    ]
    return {"success": True, "status": "completed", "total": documents, "next": None,
            "data": docs}  # fmt: skip


def _starlette(value: Any) -> bytes:
    return bytes(JSONResponse(value).body)


@pytest.mark.parametrize(
    "value",
    [
        _page(100, "x" * 2_000),
        _page(5, "y" * 100_000),
        _page(1, '\x01"\\é\u2028😀' * 40_000),
        {"a": [], "b": {}, "c": [1, -2, 3.5, 1e300, True, False, None, 10**40], "d": (1, "2")},
        {"": "", "k" * 50_000: ["v" * 50_000, {"deep": [[["z" * 9_000]]]}]},
        "a lone string " * 10_000,
        [],
    ],
)
def test_chunks_joined_are_starlettes_json_bytes(value):
    """Whatever the sizes, the chunks joined are byte for byte `JSONResponse`'s body."""
    assert "".join(chunks(value)).encode() == _starlette(value)


def test_a_streamed_array_encodes_like_a_list():
    """Documents made one at a time (`Streamed`) encode as the list of them would."""
    page = _page(20, "m" * 30_000)
    lazy = page | {"data": Streamed(doc for doc in page["data"])}
    assert "".join(chunks(lazy)).encode() == _starlette(page)


@pytest.mark.parametrize("markdown", ["x" * 100_000, "\x01" * 100_000, "😀" * 100_000])
def test_no_chunk_is_over_the_bound(markdown):
    """A 10 MB page (ASCII, all-escaped and 4-byte characters) is cut in many chunks, none
    over `MAX_CHUNK_BYTES`, and none but the last under `CHUNK_BYTES` characters."""
    parts = list(chunks(_page(100, markdown)))
    sizes = [len(part.encode()) for part in parts]
    assert len(parts) > 100
    assert max(sizes) <= MAX_CHUNK_BYTES
    assert all(len(part) >= CHUNK_BYTES for part in parts[:-1])


def test_a_long_string_is_cut_in_slices():
    """One 1 MB string alone makes chunks of a few slices each, not one 1 MB piece."""
    parts = list(chunks("s" * 1_000_000))
    assert len(parts) >= 1_000_000 // (CHUNK_BYTES + SLICE_CHARS)


def test_nan_follows_the_sender():
    """An HTTP answer refuses NaN as `JSONResponse` does; a WebSocket message sends it as
    `send_json` does."""
    with pytest.raises(ValueError, match="not JSON compliant"):
        list(chunks({"x": float("nan")}))
    assert "".join(chunks({"x": float("nan")}, allow_nan=True)) == '{"x":NaN}'


async def test_encoded_lets_other_tasks_run_between_chunks():
    """While a 10 MB message is encoded, a task scheduled meanwhile runs before it ends."""
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    async def big() -> None:
        text = await encoded(_page(100, "x" * 100_000))
        ran.append(f"big {len(text)}")

    async with asyncio.TaskGroup() as group:
        group.create_task(big())
        await asyncio.sleep(0)
        group.create_task(other())
    assert ran[0] == "other"
    assert ran[1].startswith("big ")


async def _sent(response: StreamedJson) -> list[Message]:
    messages: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        messages.append(message)

    await response({"type": "http", "path": "/v2/crawl/x"}, receive, send)
    return messages


async def test_a_streamed_page_is_sent_chunked_and_parses_to_the_same_content():
    """The answer's head has no Content-Length (so HTTP/1.1 sends it chunked), its body is
    many messages, each within the bound, and they join to `JSONResponse`'s bytes; what
    `make` held is let go once the last chunk is sent."""
    page = _page(100, "x" * 100_000)
    held: list[str] = []

    async def make() -> AsyncGenerator[dict[str, Any]]:
        held.append("turn")
        try:
            yield page | {"data": Streamed(iter(page["data"]))}
        finally:
            held.remove("turn")

    messages = await _sent(StreamedJson(make))
    start, *bodies = messages
    headers = dict(start["headers"])
    assert start["status"] == 200
    assert b"content-length" not in headers
    assert headers[b"content-type"] == b"application/json"
    assert len(bodies) > 100
    assert max(len(body["body"]) for body in bodies) <= MAX_CHUNK_BYTES
    assert [body["more_body"] for body in bodies][-2:] == [True, False]
    joined = b"".join(body["body"] for body in bodies)
    assert joined == _starlette(page)
    assert json.loads(joined) == page
    assert held == []


async def test_an_error_before_the_first_byte_is_raised_and_nothing_is_sent():
    """`make` refusing (a bad cursor) raises its ApiError from the response before anything
    is sent, so the app's handler answers it in Firecrawl's shape."""

    async def make() -> AsyncGenerator[dict[str, Any]]:
        raise ApiError(status=400, message="bad cursor")
        yield {}  # pragma: no cover - an async generator that refuses at once

    response = StreamedJson(make)
    messages: list[Message] = []

    async def send(message: Message) -> None:
        messages.append(message)

    with pytest.raises(ApiError):
        await response({"type": "http"}, _never, send)
    assert messages == []


async def _never() -> Message:
    raise AssertionError("nothing is received")
