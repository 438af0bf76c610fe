"""The graph site's application: one handler for every page, counters around it."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from _graphhtml import render_page, robots_txt, sitemap_xml
from aiohttp import web

if TYPE_CHECKING:
    from _graph import Graph
    from aiohttp.typedefs import Handler

__all__ = ["GRAPH", "HITS", "LOAD", "Load", "build_app"]

SITEMAP_PATH = "/sitemap.xml"
"""Where the sitemap is served."""

ROBOTS_PATH = "/robots.txt"
"""Where robots.txt is served."""

NOT_PAGES = frozenset({SITEMAP_PATH, ROBOTS_PATH, "/favicon.ico"})
"""Paths that are not pages: not delayed, not counted as in flight (a browser may ask for a
favicon on its own; it is a 404)."""


@dataclass(slots=True)
class Load:
    """Page requests being answered now, and the most ever answered at once."""

    in_flight: int = 0
    max_in_flight: int = 0
    delay_ms: int = 0

    def reset(self) -> None:
        self.max_in_flight = self.in_flight


GRAPH = web.AppKey("graph", "Graph")
"""The link graph the site serves."""

HITS = web.AppKey("hits", Counter[str])
"""Requests received per path and query (the path decoded, the query as sent)."""

LOAD = web.AppKey("load", Load)
"""Concurrency of page requests."""


def build_app(graph: Graph, *, delay_ms: int = 0) -> web.Application:
    """The graph site's application, with fresh counters."""
    app = web.Application(middlewares=[count_and_delay])
    app[GRAPH] = graph
    app[HITS] = Counter()
    app[LOAD] = Load(delay_ms=delay_ms)
    app.add_routes(
        [
            web.get(SITEMAP_PATH, sitemap),
            web.get(ROBOTS_PATH, robots),
            web.get("/{tail:.*}", page),
        ]
    )
    return app


@web.middleware
async def count_and_delay(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count the request; for pages, hold it `delay_ms` while it counts as in flight."""
    request.app[HITS][hit_key(request)] += 1
    if request.path in NOT_PAGES:
        return await handler(request)
    load = request.app[LOAD]
    load.in_flight += 1
    load.max_in_flight = max(load.max_in_flight, load.in_flight)
    try:
        await asyncio.sleep(load.delay_ms / 1000)
        return await handler(request)
    finally:
        load.in_flight -= 1


def hit_key(request: web.Request) -> str:
    """The decoded path (`/p/%37` is `/p/7`) and the query as sent, as in a node."""
    query = request.rel_url.raw_query_string
    return f"{request.path}?{query}" if query else request.path


async def page(request: web.Request) -> web.Response:
    graph = request.app[GRAPH]
    spec = graph.spec_of(graph.origin + hit_key(request))
    if spec.location is not None:
        raise web.HTTPFound(spec.location)
    return web.Response(text=render_page(spec), status=spec.status, content_type="text/html")


async def sitemap(request: web.Request) -> web.Response:
    body = sitemap_xml(request.app[GRAPH].sitemap_urls())
    return web.Response(text=body, content_type="application/xml")


async def robots(request: web.Request) -> web.Response:
    return web.Response(text=robots_txt(request.app[GRAPH].url(SITEMAP_PATH)))
