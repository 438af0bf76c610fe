"""Request bodies: refused with 413 past `CRAWL_GATEWAY_MAX_BODY_BYTES` before they are read
(an ASGI middleware: by `Content-Length`, or as a chunked body passes the limit), and, when
large, parsed a slice at a time and planned off the event loop, so one tenant's body never
stalls the others' calls."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Final, TypeVar

from starlette.requests import Request  # noqa: TC002 - FastAPI reads it at runtime

from service.gateway import json_slices
from service.gateway.errors import ApiError, Detail, bad_request

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

T = TypeVar("T")

OFF_LOOP_BYTES: Final = 64 * 1024
"""Bodies from this size on are parsed a slice at a time (`json_slices`) and planned in a
worker thread: json's parser takes ~0.1-0.25 s for a 10 MiB body and holds the interpreter
all along (a thread would not free the event loop), which other tenants must not wait for."""


DRAIN_BYTES: Final = 64 * 2**20
"""Most bytes of a refused body read and dropped before the 413 (a larger one: the
connection closes after the answer, and the caller may see a reset instead)."""


TOO_LARGE: Final = "body_over_limit"
"""The request state key `BodyLimit` sets (to the limit) when it cut a chunked body short."""


class BodyLimit:
    """413 in Firecrawl's shape for a body over `limit` bytes, without reading it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self._app = app
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self._limit:
            await _drain(receive, declared)
            await _too_large(send, self._limit)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self._limit:  # the body ends here; `json_body` answers 413
                    if message.get("more_body", False):
                        await _drain(receive, DRAIN_BYTES)
                    scope.setdefault("state", {})[TOO_LARGE] = self._limit
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        await self._app(scope, counted, send)


def _message(limit: int) -> str:
    return f"Payload Too Large: the body is over {limit} bytes"


async def _drain(receive: Receive, most: int) -> None:
    """Read and drop the rest of a refused body (up to `DRAIN_BYTES`), so that the caller,
    still sending, reads the 413 instead of a reset connection. Nothing is kept."""
    dropped = 0
    while dropped < min(most, DRAIN_BYTES):
        message = await receive()
        if message["type"] != "http.request":
            return
        dropped += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps({"success": False, "error": _message(limit)}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def json_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object (Firecrawl's 400 otherwise), parsed off the loop when large."""
    raw = await request.body()
    limit = getattr(request.state, TOO_LARGE, None)
    if limit is not None:
        raise ApiError(status=413, message=_message(limit))
    request.state.body_bytes = len(raw)
    try:
        parsed = await json_slices.parse(raw) if large(request) else json.loads(raw)
    except (ValueError, RecursionError):
        raise bad_request(Detail(path=("body",), message="not valid JSON")) from None
    if not isinstance(parsed, dict):
        raise bad_request(Detail(path=("body",), message="a JSON object is expected"))
    return parsed


def large(request: Request) -> bool:
    return int(getattr(request.state, "body_bytes", 0)) >= OFF_LOOP_BYTES


async def off_loop(request: Request, plan: Callable[..., T], *args: Any, **kwargs: Any) -> T:  # noqa: ANN401
    """`plan(*args, **kwargs)`, in a worker thread when the request's body was large."""
    if large(request):
        return await asyncio.to_thread(plan, *args, **kwargs)
    return plan(*args, **kwargs)


__all__ = ["BodyLimit", "json_body", "off_loop"]
