"""A request's `headers` in the browser, sent where `headers_scope` lets them go.

With `headers_scope: all` they are the context's extra headers (every request). With the
default `origin` the page routes its requests and adds them only to those of its own
origin (`net.header_scope`).

Known gap: Chromium follows a redirect of a routed request without routing its next hop,
and gives that hop the headers the first hop was continued with. So when the page's own
navigation redirects to another site, that site still gets them in the browser (the HTTP
path checks each hop). Fetching the document through `route.fetch` one hop at a time was
tried: Chromium then did not load the fulfilled document's images from other hosts.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

from playwright.async_api import Error as PlaywrightError

from service.net.header_scope import sends_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from playwright.async_api import Page, Request, Route

    from service.contracts import CrawlOptions

ALL_REQUESTS: Final = "**/*"

UNROUTE_DEADLINE_S: Final = 5.0


def context_headers(options: CrawlOptions) -> dict[str, str] | None:
    """The context's extra headers: the request's, when they go everywhere."""
    if not options.headers or options.headers_scope != "all":
        return None
    return dict(options.headers)


@contextlib.asynccontextmanager
async def scoped_headers(page: Page, url: str, options: CrawlOptions) -> AsyncIterator[None]:
    """While the block renders `url` in `page`, its requests within the scope carry the
    request's headers."""
    if not options.headers or options.headers_scope == "all":
        yield
        return
    extra = dict(options.headers)

    async def route(route: Route) -> None:
        request = route.request
        page_url = _page_url(request, url)
        if sends_headers("origin", page_url, request.url, navigation=_is_page(request)):
            await route.fallback(headers={**request.headers, **extra})
        else:
            await route.fallback()

    await page.route(ALL_REQUESTS, route)
    try:
        yield
    finally:
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(page.unroute(ALL_REQUESTS, route), UNROUTE_DEADLINE_S)


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
