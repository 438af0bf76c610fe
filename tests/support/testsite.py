"""A local website for integration tests and benchmarks, with a hit counter beside it.

`serve()` runs the site on a free port; `hit_counter()` runs a listener that counts
connections, to prove the URL policy lets nothing through.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import _bombs
import _cachepages
import _changepages
import _content
import _hostile
import _identity
import _isolation
import _isolation_net
import _jsapps
import _latejs
import _navigating
import _proxyabuse
import _routes
import _scriptrequests
import _sitemaps
import _state
import _webrtc
from _hitcounter import HitCounter, hit_counter
from _jsapps import JS_KINDS, marker
from _latejs import LATE_KINDS, late_marker
from aiohttp import web
from yarl import URL

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import AsyncIterator

__all__ = [
    "JS_KINDS",
    "LATE_KINDS",
    "HitCounter",
    "TestSite",
    "build_app",
    "hit_counter",
    "late_marker",
    "marker",
    "serve",
]

SHUTDOWN_TIMEOUT_SECONDS = 1.0
"""How long stopping waits for open requests (a trickle never ends) before cancelling them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TestSite:
    """A running test site: where it listens and what it has been asked for."""

    __test__: ClassVar[bool] = False  # not a pytest test class despite the name

    base_url: str
    port: int
    hits: Counter[str]
    cached_fetches: Counter[str]
    """Fetches of `/isolation/cached.js` per `tag`."""
    late_arrived: Counter[str]
    """Requests of `/isolation/late-cookie` received per `tag`."""
    late_ended: Counter[str]
    """Requests of `/isolation/late-cookie` ended (answered or cancelled) per `tag`."""
    cache_answers: Counter[str]
    """Answers of the `/cache/...` pages, keyed `"<path> <status>"`."""
    authorized: Counter[str]
    """Requests received with an `Authorization` header, per path."""
    held: Counter[str]
    """Requests of `/scripted/hold` that `arrived` and that `ended`."""
    arrivals: dict[str, list[float]]
    """When (`time.monotonic()`) each request arrived, per path."""

    def url(self, path: str) -> str:
        """The absolute URL of `path` (which starts with `/`, and may carry a query)."""
        return self.base_url + path


def build_app() -> web.Application:
    """The test site's application, with fresh counters."""
    app = web.Application()
    _state.install(app)
    app.add_routes(_routes.ROUTES)
    app.add_routes(_hostile.ROUTES)
    app.add_routes(_webrtc.ROUTES)
    app.add_routes(_navigating.ROUTES)
    app.add_routes(_jsapps.ROUTES)
    app.add_routes(_latejs.ROUTES)
    app.add_routes(_isolation.ROUTES)
    app.add_routes(_isolation_net.ROUTES)
    app.add_routes(_sitemaps.ROUTES)
    app.add_routes(_proxyabuse.ROUTES)
    app.add_routes(_content.ROUTES)
    app.add_routes(_identity.ROUTES)
    app.add_routes(_bombs.ROUTES)
    _scriptrequests.install(app)
    app.add_routes(_scriptrequests.ROUTES)
    _cachepages.install(app)
    app.add_routes(_cachepages.ROUTES)
    _changepages.install(app)
    app.add_routes(_changepages.ROUTES)
    return app


@asynccontextmanager
async def serve(host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[TestSite]:
    """Run the test site on `host`:`port` (0 picks a free port) until the block exits.

    A client that hangs up cancels its request handler quietly.
    """
    app = build_app()
    runner = web.AppRunner(
        app, handler_cancellation=True, shutdown_timeout=SHUTDOWN_TIMEOUT_SECONDS
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        bound = runner.addresses[0][1]
        base_url = str(URL.build(scheme="http", host=host, port=bound))
        yield TestSite(
            base_url=base_url,
            port=bound,
            hits=app[_state.HITS],
            cached_fetches=app[_state.CACHED_FETCHES],
            late_arrived=app[_state.LATE_ARRIVED],
            late_ended=app[_state.LATE_ENDED],
            cache_answers=app[_cachepages.CACHE_ANSWERS],
            authorized=app[_state.AUTHORIZED],
            held=app[_scriptrequests.HELD],
            arrivals=app[_state.ARRIVALS],
        )
    finally:
        await runner.cleanup()
