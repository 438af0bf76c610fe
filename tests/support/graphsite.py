"""A generated site with a known link graph, for deep-crawl tests and the reference crawl.

About 300 pages: a home page, articles `/p/0` … `/p/269` linking each other in cycles, a
`/docs/` subtree, an endless `/calendar`, orphans only the sitemap lists, pages reached only
through nofollow links or a script, off-site links and a redirect to a private address.
`serve_graph()` runs it on a free port; the `GraphSite` it yields also answers what the graph
is (`links_of`, `status_of`, `sitemap_urls`) without any request, for `reference_crawl`.
"""

from __future__ import annotations

import socket
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass
from typing import TYPE_CHECKING

from _graph import Graph, Link
from _graphroutes import GRAPH, HITS, LOAD, Load, build_app
from aiohttp import web
from yarl import URL

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import AsyncIterator

__all__ = ["Graph", "GraphSite", "Link", "serve_graph"]

SHUTDOWN_TIMEOUT_SECONDS = 1.0
"""How long stopping waits for open (possibly delayed) requests before cancelling them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphSite:
    """A running graph site: where it listens, what it was asked, and its link graph."""

    base_url: str
    port: int
    hits: Counter[str]
    graph: Graph
    _load: Load

    def url(self, path: str) -> str:
        """The node (normalised absolute URL) of `path`, which starts with `/`."""
        return self.graph.url(path)

    @property
    def in_flight(self) -> int:
        """Page requests being answered now."""
        return self._load.in_flight

    @property
    def max_in_flight(self) -> int:
        """The most page requests ever answered at once (since the last reset)."""
        return self._load.max_in_flight

    def reset_counters(self) -> None:
        """Forget hits and the concurrency peak, so a test sees only its own requests."""
        self.hits.clear()
        self._load.reset()

    def links_of(self, node: str) -> list[Link]:
        """See `Graph.links_of`."""
        return self.graph.links_of(node)

    def status_of(self, node: str) -> int:
        """See `Graph.status_of`."""
        return self.graph.status_of(node)

    def sitemap_urls(self) -> list[str]:
        """See `Graph.sitemap_urls`."""
        return self.graph.sitemap_urls()


@asynccontextmanager
async def serve_graph(
    host: str = "127.0.0.1", port: int = 0, *, delay_ms: int = 0
) -> AsyncIterator[GraphSite]:
    """Run the graph site on `host`:`port` (0 picks a free port) until the block exits.

    Every page request waits `delay_ms` before it is answered, so overlaps can be observed.
    """
    with closing(socket.create_server((host, port))) as sock:
        bound = sock.getsockname()[1]
        base_url = str(URL.build(scheme="http", host=host, port=bound))
        app = build_app(Graph(base_url), delay_ms=delay_ms)
        runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS
        )
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
            yield GraphSite(
                base_url=base_url, port=bound, hits=app[HITS], graph=app[GRAPH], _load=app[LOAD]
            )
        finally:
            await runner.cleanup()
