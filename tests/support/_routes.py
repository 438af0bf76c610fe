"""Handlers of the test site's well-behaved routes: pages, redirects, statuses, delays."""

from __future__ import annotations

import asyncio
from html import escape

import _pages
import _state
from _params import path_int, query_int
from aiohttp import web

PAGE_MAX = 10**9
"""Highest `/page/{n}` served; larger numbers are a 404."""

LATE_DELAY_MS = 300
"""Default delay before `/js/late` inserts its content."""

CHAIN_MAX_HOPS = 100
"""Longest redirect chain `/redirect/chain/{k}` builds."""

SLOW_DEFAULT_MS = 5_000
"""Default wait of `/slow`."""

SLOW_MAX_MS = 600_000
"""Longest wait `/slow` accepts."""

LARGE_DEFAULT_KB = 2_000
"""Default size of `/large` in KiB."""

LARGE_MAX_KB = 20_000
"""Largest `/large` built in memory; `/hostile/huge` streams bigger ones."""

MULTIBYTE_DEFAULT_KB = 2_500
"""Default size of `/multibyte` in KiB of UTF-8: over two default message limits."""

ALLOC_DEFAULT_MB = 100
"""Default allocation of `/alloc` in MiB."""

ALLOC_MAX_MB = 8_192
"""Largest allocation `/alloc` accepts."""

FLAKY_DEFAULT_FAILURES = 2
"""Failures `/flaky/{key}` serves before it succeeds."""

FLAKY_DEFAULT_STATUS = 503
"""Status of a `/flaky/{key}` failure."""

ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"
"""The site's robots.txt."""


def html(text: str, status: int = 200) -> web.Response:
    """An HTML response."""
    return web.Response(text=text, status=status, content_type="text/html")


async def index(request: web.Request) -> web.Response:
    return html(_pages.index_page())


async def page(request: web.Request) -> web.Response:
    n = path_int(request, "n", 0, PAGE_MAX)
    return html(_pages.article_page(f"{request.scheme}://{request.host}", n))


SESSION_COOKIE = "crawl_session"
"""The cookie `/cookie/set` sets and `/cookie/show` shows."""


async def cookie_set(request: web.Request) -> web.Response:
    """Sets the cookie to `?v=`; the title says so."""
    value = request.query.get("v", "set")
    response = html(f"<title>cookie set: {escape(value)}</title><p>set</p>")
    response.set_cookie(SESSION_COOKIE, value)
    return response


async def cookie_show(request: web.Request) -> web.Response:
    """The title names the cookie the browser sent (`none` without one)."""
    value = request.cookies.get(SESSION_COOKIE, "none")
    return html(f"<title>cookie: {escape(value)}</title><p>shown</p>")


async def late(request: web.Request) -> web.Response:
    delay_ms = query_int(request, "delay_ms", LATE_DELAY_MS, 0, SLOW_MAX_MS)
    label = query_int(request, "n", 1, 0, PAGE_MAX)
    return html(_pages.late_page(delay_ms, label))


async def redirect(request: web.Request) -> web.Response:
    target = request.query.get("to", "/page/1")
    if not target.startswith("/") or target.startswith("//"):
        raise web.HTTPBadRequest(text="to must be a path on this site")
    raise web.HTTPFound(target)


async def redirect_chain(request: web.Request) -> web.Response:
    hops = path_int(request, "k", 0, CHAIN_MAX_HOPS)
    raise web.HTTPFound(f"/redirect/chain/{hops - 1}" if hops > 1 else "/page/1")


async def status(request: web.Request) -> web.Response:
    code = path_int(request, "code", 200, 599)
    if code in {204, 304}:
        return web.Response(status=code)
    return html(_pages.status_page(code), status=code)


async def slow(request: web.Request) -> web.Response:
    """Cancelled quietly by aiohttp when the client hangs up (handler_cancellation).

    `/slow/{key}` is the same page, counted apart under its own path in the site's hits.
    """
    delay_ms = query_int(request, "ms", SLOW_DEFAULT_MS, 0, SLOW_MAX_MS)
    await asyncio.sleep(delay_ms / 1000)
    return html(_pages.simple_page("Slow page", f"<p>Answered after {delay_ms} ms.</p>"))


async def large(request: web.Request) -> web.Response:
    kb = query_int(request, "kb", LARGE_DEFAULT_KB, 1, LARGE_MAX_KB)
    return html(_pages.large_page(kb * 1024))


async def multibyte(request: web.Request) -> web.Response:
    kb = query_int(request, "kb", MULTIBYTE_DEFAULT_KB, 1, LARGE_MAX_KB)
    return html(_pages.multibyte_page(kb * 1024))


async def flaky(request: web.Request) -> web.Response:
    key = request.match_info["key"]
    failures = query_int(request, "fail", FLAKY_DEFAULT_FAILURES, 0, PAGE_MAX)
    code = query_int(request, "status", FLAKY_DEFAULT_STATUS, 400, 599)
    attempts = request.app[_state.FLAKY_ATTEMPTS]
    attempts[key] += 1
    if attempts[key] > failures:
        return html(_pages.simple_page(f"Flaky {key}", f"<p>Attempt {attempts[key]}.</p>"))
    response = html(_pages.status_page(code), status=code)
    if "retry_after" in request.query:
        response.headers["Retry-After"] = request.query["retry_after"]
    return response


async def reset(request: web.Request) -> web.Response:
    _state.reset(request.app)
    return web.Response(text="reset\n")


async def alloc(request: web.Request) -> web.Response:
    mb = query_int(request, "mb", ALLOC_DEFAULT_MB, 0, ALLOC_MAX_MB)
    hold = query_int(request, "hold", 1, 0, 1)
    return html(_pages.alloc_page(mb, hold=bool(hold)))


async def robots(request: web.Request) -> web.Response:
    return web.Response(text=ROBOTS_TXT)


async def private(request: web.Request) -> web.Response:
    name = request.match_info["x"]
    return html(_pages.simple_page(f"Private {name}", "<p>Robots may not fetch this.</p>"))


ROUTES = (
    web.get("/", index),
    web.get(r"/page/{n:\d+}", page),
    web.get("/js/late", late),
    web.get("/cookie/set", cookie_set),
    web.get("/cookie/show", cookie_show),
    web.get("/redirect", redirect),
    web.get(r"/redirect/chain/{k:\d+}", redirect_chain),
    web.get(r"/status/{code:\d+}", status),
    web.get("/slow", slow),
    web.get("/slow/{key}", slow),
    web.get("/large", large),
    web.get("/multibyte", multibyte),
    web.get("/flaky/{key}", flaky),
    web.get("/reset", reset),
    web.get("/alloc", alloc),
    web.get("/robots.txt", robots),
    web.get("/private/{x}", private),
)
"""The well-behaved routes."""
