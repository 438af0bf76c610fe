"""A request's `headers` in the browser, sent where `headers_scope` lets them go.

With `headers_scope: all` they are the context's extra headers (every request). With the
default `origin` the page routes its requests and gives them only to requests of its own
origin (`net.header_scope`) whose redirect it can see before Chromium follows it:

- the page's own document (a navigation of its main frame) and the frames, stylesheets,
  scripts, images, fonts, XHR and `fetch` requests of that origin are fetched by Playwright,
  one hop, through the context's proxy and cookie jar, and the route is fulfilled with the
  answer, buffered whole (a long poll is held until it answers, the page is read or its
  deadline ends);
- its other requests (media, event streams, pings, manifests, ...: answers that stream or
  stay open) are continued without them.

A redirect's next hop is never routed: Playwright continues it itself, with the headers the
first hop was continued with. A request continued with the request's headers would hand
them to whatever site it redirects to; one fulfilled with a redirect makes Chromium send its
next hop with none of them. The page's own document hops on its site get them from a
DevTools session of their own (`document_hops`), which judges each hop. A fulfilled answer
does not log Chromium in to the egress proxy, so the context logs in first (`proxy_login`).
When the block ends, a request still being fetched (a long poll) is aborted: a request still
paused when the route goes is sent by Chromium itself, a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from service.browser.document_hops import document_hops
from service.net.header_scope import sends_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable

    from playwright.async_api import Page, Request, Route

    from service.browser.deadline import StepDeadline
    from service.browser.proxy_login import ProxyLogin
    from service.contracts import CrawlOptions

ALL_REQUESTS: Final = "**/*"

UNROUTE_DEADLINE_S: Final = 5.0

ROUTE_DEADLINE_S: Final = 5.0
"""Deadline of one answer to a routed request (fulfil, fall back, abort): the browser's own
round trip, not the network's."""

FETCHED_TYPES: Final = frozenset(
    {"document", "stylesheet", "script", "image", "font", "xhr", "fetch"}
)
"""Requests within the scope that are fetched one hop at a time with the headers, like the
page's document: those whose answer the page takes whole. The others (media, event streams
and any other type) may stream or stay open; they get none of the headers, as their redirect
cannot be seen before Chromium follows it."""

FETCH_MARGIN_S: Final = 2.0
"""Time beyond a hop's own fetch timeout for Playwright's answer about it."""


def context_headers(options: CrawlOptions) -> dict[str, str] | None:
    """The context's extra headers: the request's, when they go everywhere."""
    if not options.headers or options.headers_scope != "all":
        return None
    return dict(options.headers)


@contextlib.asynccontextmanager
async def scoped_headers(
    page: Page, url: str, options: CrawlOptions, deadline: StepDeadline, login: ProxyLogin
) -> AsyncIterator[None]:
    """While the block renders `url` in `page` (by `deadline`), its requests within the scope
    that are fetched hop by hop carry the request's headers; `page`'s context logs in to the
    egress proxy first (`login`) when they are routed."""
    if not options.headers or options.headers_scope == "all":
        yield
        return
    extra = {name.lower(): value for name, value in options.headers.items()}
    await login.ensure(page, deadline)

    fetching: set[Route] = set()

    async def route(route: Route) -> None:
        request = route.request
        page_url = _page_url(request, url)
        navigation = _is_page(request)
        fetched = navigation or request.resource_type in FETCHED_TYPES
        if not fetched or not sends_headers("origin", page_url, request.url, navigation=navigation):
            await _answer(route.fallback())
            return
        fetching.add(route)
        try:
            await _fetched_hop(route, {**request.headers, **extra}, deadline)
        finally:
            fetching.discard(route)

    await page.route(ALL_REQUESTS, route)
    try:
        async with document_hops(page, url, extra):
            yield
    finally:
        # Chromium sends a request still paused when the route goes again, itself: abort it
        await asyncio.gather(*(_answer(held.abort("aborted")) for held in list(fetching)))
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(page.unroute(ALL_REQUESTS, route), UNROUTE_DEADLINE_S)


async def _fetched_hop(route: Route, headers: dict[str, str], deadline: StepDeadline) -> None:
    """Answer the request with one hop fetched with `headers` (a redirect is given to
    Chromium as it came). A hop that cannot be fetched is left to Chromium, without the
    headers, so it fails as any request does (the egress proxy's refusal included); one that
    takes longer than the page may wait ends `timedout`."""
    timeout_s = deadline.remaining_s()
    try:
        answer = await asyncio.wait_for(
            route.fetch(headers=headers, max_redirects=0, timeout=timeout_s * 1000),
            timeout_s + FETCH_MARGIN_S,
        )
    except (PlaywrightTimeoutError, TimeoutError):
        await _answer(route.abort("timedout"))
        return
    except PlaywrightError:
        await _answer(route.fallback())
        return
    try:  # the body crosses to Chromium: as long as the page has left, at least
        await _answer(route.fulfill(response=answer), max(ROUTE_DEADLINE_S, deadline.left_s()))
    finally:
        await _answer(answer.dispose())


async def _answer(step: Awaitable[None], timeout_s: float = ROUTE_DEADLINE_S) -> None:
    """One answer to a routed request, within `timeout_s`; a page that went meanwhile
    needs none."""
    with contextlib.suppress(PlaywrightError, TimeoutError):
        await asyncio.wait_for(step, timeout_s)


def _is_page(request: Request) -> bool:
    """The request loads the page's own document (its navigation or a redirect's hop)."""
    try:
        return request.is_navigation_request() and request.frame.parent_frame is None
    except PlaywrightError:  # a service worker's request has no frame
        return False


def _page_url(request: Request, url: str) -> str:
    """The page's URL as the request sees it: its main frame's document once that is on the
    site of `url` (after a same-site redirect), else `url` itself."""
    try:
        current = request.frame.page.main_frame.url
    except PlaywrightError:
        return url
    if current.startswith(("http://", "https://")) and sends_headers(
        "origin", url, current, navigation=True
    ):
        return current
    return url
