"""Per-application state of the test site: request counts, flaky-route attempts and fetches
of the cacheable isolation script, late isolation answers."""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from aiohttp.typedefs import Handler

HITS = web.AppKey("hits", Counter[str])
"""Requests received per path, counted before routing so 404s count too."""

FLAKY_ATTEMPTS = web.AppKey("flaky_attempts", Counter[str])
"""Requests received per `/flaky/{key}` key."""

CACHED_FETCHES = web.AppKey("cached_fetches", Counter[str])
"""Requests received for `/isolation/cached.js` per `tag` (see `_isolation`)."""


LATE_ARRIVED = web.AppKey("late_arrived", Counter[str])
"""Requests of `/isolation/late-cookie` received per `tag` (see `_isolation_net`)."""

LATE_ENDED = web.AppKey("late_ended", Counter[str])
"""Requests of `/isolation/late-cookie` ended (answered or cancelled) per `tag`."""

AUTHORIZED = web.AppKey("authorized", Counter[str])
"""Requests received with an `Authorization` header, per path."""

ARRIVALS = web.AppKey("arrivals", dict[str, list[float]])
"""When (`time.monotonic()`) each request arrived, per path."""


def install(app: web.Application) -> None:
    """Give `app` fresh counters and the middleware that counts every request."""
    app[HITS] = Counter()
    app[FLAKY_ATTEMPTS] = Counter()
    app[CACHED_FETCHES] = Counter()
    app[LATE_ARRIVED] = Counter()
    app[LATE_ENDED] = Counter()
    app[AUTHORIZED] = Counter()
    app[ARRIVALS] = {}
    app.middlewares.append(count_hits)


@web.middleware
async def count_hits(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count the request under its path, then let it through."""
    request.app[HITS][request.path] += 1
    request.app[ARRIVALS].setdefault(request.path, []).append(time.monotonic())
    if "Authorization" in request.headers:
        request.app[AUTHORIZED][request.path] += 1
    return await handler(request)


def reset(app: web.Application) -> None:
    """Forget every count, including the request that asked for the reset."""
    app[HITS].clear()
    app[FLAKY_ATTEMPTS].clear()
    app[CACHED_FETCHES].clear()
    app[LATE_ARRIVED].clear()
    app[LATE_ENDED].clear()
    app[ARRIVALS].clear()
