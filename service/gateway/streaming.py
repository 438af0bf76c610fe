"""JSON answers encoded a slice at a time: a 10 MB page of documents is sent as chunks of at
most `CHUNK_BYTES` or so, the event loop serving other callers between two chunks, instead of
one `json.dumps` that holds it for the whole page. Joined, the chunks are exactly the bytes of
`json.dumps(value, ensure_ascii=False, separators=(",", ":"))`, what Starlette's
`JSONResponse` and `WebSocket.send_json` send. Each chunk is made as one of the loop's
heavy slices (`pacing.SLICES`). Pure, but for `encoded` and the response at the end."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Final

import structlog
from starlette.responses import Response

from service.gateway.pacing import SLICES

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Callable, Iterable, Iterator

    from starlette.types import Message, Receive, Scope, Send

log = structlog.get_logger(__name__)

CHUNK_BYTES: Final = 64 * 1024
"""A chunk is cut once it holds this many characters of JSON (one step of the event loop)."""

SLICE_CHARS: Final = 8 * 1024
"""Strings longer than this are encoded a slice of this many characters at a time."""

MAX_CHUNK_BYTES: Final = 4 * CHUNK_BYTES + 6 * SLICE_CHARS
"""The most bytes one chunk can hold: under `CHUNK_BYTES` characters (4 bytes of UTF-8
each at most) before the last piece, a string slice (6 bytes a character when every one is
escaped as `\\u00XX`) or a scalar (a number: a few dozen characters) at most."""

SEND_DEADLINE_S: Final = 30.0
"""Longest wait for a caller to take one chunk; past it the answer is dropped (the
connection closes) and what it held (the tenant's turn, the page) is let go."""


class Streamed:
    """A JSON array whose items are made as they are encoded (documents built one at a time
    from the results, not all before the first byte)."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = items

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)


def chunks(value: Any, *, allow_nan: bool = False) -> Iterator[str]:  # noqa: ANN401
    """The JSON text of `value` in chunks of about `CHUNK_BYTES` characters (see
    `MAX_CHUNK_BYTES`); a `Streamed` inside it encodes as an array."""
    pending: list[str] = []
    size = 0
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=allow_nan, separators=(",", ":")).encode
    for piece in _pieces(value, encode):
        pending.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield "".join(pending)
            pending, size = [], 0
    if pending:
        yield "".join(pending)


def _pieces(value: Any, encode: Callable[[Any], str]) -> Iterator[str]:  # noqa: ANN401
    if _room(value, SLICE_CHARS) >= 0:  # small: json's encoder at once
        yield encode(value)
    elif isinstance(value, str):
        yield from _string(value, encode)
    elif isinstance(value, dict) and all(isinstance(key, str) for key in value):
        yield from _object(value, encode)
    elif isinstance(value, (list, tuple, Streamed)):
        yield from _array(value, encode)
    else:  # scalars, and an object with keys json converts itself (not ours: never large)
        yield encode(value)


LARGEST_SCALAR: Final = 32
"""Characters a number's JSON is counted for (a float's repr is at most 24)."""


def _room(value: Any, budget: int) -> int:  # noqa: ANN401
    """`budget` less the characters of `value` before escaping, counted until they pass it
    (then a negative number): what is left of it after `value` is encoded."""
    if isinstance(value, str):
        return budget - len(value) - 2
    if isinstance(value, dict):
        return _room_object(value, budget - 2)
    if isinstance(value, (list, tuple)):
        return _room_array(value, budget - 2)
    if isinstance(value, int) and not -(10**LARGEST_SCALAR) < value < 10**LARGEST_SCALAR:
        return -1
    return -1 if isinstance(value, Streamed) else budget - LARGEST_SCALAR


def _room_object(value: dict[Any, Any], budget: int) -> int:
    for key, item in value.items():
        if budget < 0 or not isinstance(key, str):
            return -1
        budget = _room(item, budget - len(key) - 4)
    return budget


def _room_array(values: list[Any] | tuple[Any, ...], budget: int) -> int:
    for item in values:
        if budget < 0:
            return budget
        budget = _room(item, budget - 1)
    return budget


def _string(text: str, encode: Callable[[Any], str]) -> Iterator[str]:
    """A string, slice by slice: json escapes a character at a time, so the slices' encodings
    joined are the whole string's."""
    if len(text) <= SLICE_CHARS:
        yield encode(text)
        return
    yield '"'
    for start in range(0, len(text), SLICE_CHARS):
        yield encode(text[start : start + SLICE_CHARS])[1:-1]
    yield '"'


def _object(value: dict[str, Any], encode: Callable[[Any], str]) -> Iterator[str]:
    yield "{"
    for n, (key, item) in enumerate(value.items()):
        if n:
            yield ","
        yield from _string(key, encode)
        yield ":"
        yield from _pieces(item, encode)
    yield "}"


def _array(values: Iterable[Any], encode: Callable[[Any], str]) -> Iterator[str]:
    yield "["
    for n, item in enumerate(values):
        if n:
            yield ","
        yield from _pieces(item, encode)
    yield "]"


async def encoded(value: Any, *, allow_nan: bool = False) -> str:  # noqa: ANN401
    """The JSON text of `value` (for a WebSocket message, which is sent whole), made a chunk
    at a time with the event loop free between two chunks."""
    parts: list[str] = []
    pending = chunks(value, allow_nan=allow_nan)
    while (chunk := await SLICES.run(lambda: next(pending, None))) is not None:
        parts.append(chunk)
    return "".join(parts)


class StreamedJson(Response):
    """A 200 JSON answer made when the response is sent: `make` runs first (it may raise an
    `ApiError`, answered in Firecrawl's shape since nothing was sent yet) and yields the
    value to send; the value is sent in chunks (`Transfer-Encoding: chunked`), the loop free
    between two of them. `make` is an async generator that yields once: what it holds around
    its `yield` (a tenant's turn, the page it read) is held until the last chunk is sent."""

    media_type = "application/json"

    def __init__(self, make: Callable[[], AsyncGenerator[Any]]) -> None:
        super().__init__(status_code=200, media_type=self.media_type)
        self._make = make
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: ARG002 - ASGI's signature
        made = self._make()
        try:
            value = await anext(made)
            start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
            await send(start)
            await _stream(send, value, scope.get("path"))
        finally:
            await made.aclose()


async def _stream(send: Send, value: Any, path: str | None) -> None:  # noqa: ANN401
    """`value`'s chunks, then the end of the body; a caller that does not take a chunk
    within `SEND_DEADLINE_S` gets no more (uvicorn closes the unfinished answer)."""
    pending = chunks(value)
    try:
        while (chunk := await SLICES.run(lambda: _encoded(next(pending, None)))) is not None:
            await _sent(send, chunk, more=True)
        await _sent(send, b"", more=False)
    except TimeoutError:
        log.warning("gateway.slow_caller", path=path, deadline_s=SEND_DEADLINE_S)


def _encoded(chunk: str | None) -> bytes | None:
    return None if chunk is None else chunk.encode()


async def _sent(send: Callable[[Message], Any], body: bytes, *, more: bool) -> None:
    async with asyncio.timeout(SEND_DEADLINE_S):
        await send({"type": "http.response.body", "body": body, "more_body": more})
