"""The test site answering on many loopback addresses at once, counting pages in flight per host.

`serve_hosts()` binds the test site (`testsite.build_app`: `/slow/{key}?ms=` and the rest) to
every address on one port (`0.0.0.0`: 127.0.0.2, 127.0.0.3, ... are all loopback on Linux), so
each address is a host of its own to the crawler. Beside the test site's routes it serves a
link mesh for deep crawls spread over hosts, and counts the requests being answered at once per
`Host` header (its peak is what per-host politeness promises to bound).
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import _state
from _params import query_int
from aiohttp import web
from testsite import SHUTDOWN_TIMEOUT_SECONDS, build_app

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ["HostLoad", "HostSite", "host_address", "serve_hosts"]

MESH_FANOUT: Final = 3
"""Links from one mesh page to pages further down (and one back to an earlier page)."""


def host_address(n: int) -> str:
    """The `n`-th host (from 0): 127.0.0.2, 127.0.0.3, ..."""
    return f"127.0.0.{2 + n}"


@dataclass(slots=True)
class HostLoad:
    """Requests being answered now, and the most ever at once, per `Host` header (host:port)."""

    now: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)

    def reset(self) -> None:
        self.now.clear()
        self.peak.clear()

    def top(self) -> tuple[str, int]:
        """The host with the highest peak, and that peak (("", 0) before any request)."""
        return max(self.peak.items(), key=lambda item: item[1], default=("", 0))


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSite:
    port: int
    load: HostLoad
    hits: Counter[str]
    """Requests per path (any host), as `TestSite.hits`."""

    def origin(self, n: int) -> str:
        """The origin of the `n`-th host."""
        return f"http://{host_address(n)}:{self.port}"

    def allowed_hosts(self, hosts: int) -> str:
        """`CRAWL_ALLOWED_HOSTS` for the first `hosts` hosts (`host:port`, comma-separated)."""
        return ",".join(f"{host_address(n)}:{self.port}" for n in range(hosts))

    def mesh_seeds(self, pages: int, hosts: int, ms: int) -> list[str]:
        """One seed per host: mesh pages 0 .. hosts-1, each on its own host."""
        return [mesh_url(self.port, n, pages, hosts, ms) for n in range(hosts)]


def mesh_url(port: int, n: int, pages: int, hosts: int, ms: int) -> str:
    """Mesh page `n` (of `pages`, spread over `hosts` hosts: page n lives on host n % hosts)."""
    return f"http://{host_address(n % hosts)}:{port}/mesh/{n}?pages={pages}&hosts={hosts}&ms={ms}"


async def mesh(request: web.Request) -> web.Response:
    """Mesh page `n`: links to pages hosts+3n .. hosts+3n+2 (a tree from the `hosts` seeds,
    each child on another host) and back to page n // 2 (a cycle the crawl must not repeat).
    Every page of 0 .. pages-1 is reached within depth log3(pages / hosts) + 1."""
    n = int(request.match_info["n"])
    pages = query_int(request, "pages", 300, 1, 100_000)
    hosts = query_int(request, "hosts", 10, 1, 200)
    ms = query_int(request, "ms", 0, 0, 600_000)
    if n >= pages:
        raise web.HTTPNotFound
    await asyncio.sleep(ms / 1000)
    port = request.url.port or 80
    targets = [hosts + MESH_FANOUT * n + j for j in range(MESH_FANOUT)] + [n // 2]
    links = "".join(
        f'<li><a href="{mesh_url(port, t, pages, hosts, ms)}">page {t}</a></li>'
        for t in targets
        if t < pages
    )
    body = f"<html><head><title>Mesh {n}</title></head><body><ul>{links}</ul></body></html>"
    return web.Response(text=body, content_type="text/html")


def _counting(load: HostLoad) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path == "/robots.txt":
            return await handler(request)
        host = request.host
        load.now[host] += 1
        load.peak[host] = max(load.peak[host], load.now[host])
        try:
            return await handler(request)
        finally:
            load.now[host] -= 1

    return middleware


@asynccontextmanager
async def serve_hosts(port: int = 0) -> AsyncIterator[HostSite]:
    """The test site and the mesh on every address at `port` (0: a free one) until the block
    exits."""
    with closing(socket.create_server(("0.0.0.0", port))) as sock:  # noqa: S104
        bound = sock.getsockname()[1]
        load = HostLoad()
        app = build_app()
        app.middlewares.append(_counting(load))
        app.router.add_get(r"/mesh/{n:\d+}", mesh)
        runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS
        )
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
            yield HostSite(port=bound, load=load, hits=app[_state.HITS])
        finally:
            await runner.cleanup()
