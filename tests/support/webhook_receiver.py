"""A webhook receiver for integration tests: an aiohttp server on a loopback address that
records every delivery (path, query, headers, raw body) and answers as the test says."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web
from ports import unused_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    Answer = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class Delivery:
    path: str
    query: str
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.raw)
        return parsed

    @property
    def type(self) -> str:
        return str(self.body.get("type"))


@dataclass
class Receiver:
    host: str
    port: int
    deliveries: list[Delivery] = field(default_factory=list)

    def url(self, path: str = "/hook") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    @property
    def target(self) -> str:
        """`host:port`, as `CRAWL_ALLOWED_HOSTS` names it."""
        return self.url("").removeprefix("http://")

    def of(self, job_id: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.body.get("id") == job_id]

    def types(self, job_id: str) -> list[str]:
        return [d.type for d in self.of(job_id)]


async def _ok(_: web.Request) -> web.StreamResponse:
    return web.Response(text="ok")


@asynccontextmanager
async def receiving(host: str = "127.0.0.1", answer: Answer = _ok) -> AsyncIterator[Receiver]:
    """A receiver on `host` that records each POST on arrival, then lets `answer` reply."""
    receiver = Receiver(host=host, port=unused_port())

    async def hook(request: web.Request) -> web.StreamResponse:
        receiver.deliveries.append(
            Delivery(
                path=request.path,
                query=request.query_string,
                headers=dict(request.headers),
                raw=await request.read(),
            )
        )
        return await answer(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, receiver.port).start()
    try:
        yield receiver
    finally:
        await runner.cleanup()
