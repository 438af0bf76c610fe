"""Each hop of the page's document, its redirects' included, carries the request's headers
while it stays on the page's site (`headers_scope: origin`).

Playwright never routes a redirect's next hop (`headers.py`), but Chromium pauses every hop
of a request again for a DevTools session of its own that enabled `Fetch` at the request
stage, and a hop's header overrides end with it: they do not reach the next hop. So a second
session on the page pauses its main frame's documents and continues each with the headers
when `sends_headers` lets them go there (the page's origin, or its site for a navigation),
or as it came. Chromium still follows the redirect itself: the page's URL, its relative
links and `final_url` are the last hop's. The session neither answers nor holds a request
(Playwright's route and its proxy login go on as before); when it is detached, a hop still
paused in it is let through by Chromium, once.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Final, TypeVar

from playwright.async_api import Error as PlaywrightError

from service.net.header_scope import sends_headers

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Mapping

    from playwright.async_api import CDPSession, Page

_T = TypeVar("_T")

SESSION_DEADLINE_S: Final = 5.0
"""Deadline of one DevTools command of the session (attach, enable, continue a hop,
detach): the browser's own round trip, not the network's."""

DOCUMENTS: Final = {"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}
"""The requests the session pauses: documents (of any frame; it judges only the main
frame's), before each hop is sent."""


@contextlib.asynccontextmanager
async def document_hops(page: Page, url: str, headers: Mapping[str, str]) -> AsyncIterator[None]:
    """While the block runs, each hop of `page`'s main frame documents that is within the
    origin scope of `url` is sent with `headers` (lower-case names)."""
    session = await _call(page.context.new_cdp_session(page))
    pending: set[asyncio.Task[None]] = set()
    try:
        tree = await _call(session.send("Page.getFrameTree"))
        main_frame = tree["frameTree"]["frame"]["id"]

        def paused(event: dict[str, Any]) -> None:
            given = event.get("frameId") == main_frame and sends_headers(
                "origin", url, event["request"]["url"], navigation=True
            )
            task = asyncio.ensure_future(_continue(session, event, headers if given else None))
            pending.add(task)
            task.add_done_callback(pending.discard)

        session.on("Fetch.requestPaused", paused)
        await _call(session.send("Fetch.enable", {"patterns": [DOCUMENTS]}))
        yield
    finally:
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await _call(session.detach())
        await asyncio.gather(*pending)


async def _continue(
    session: CDPSession, event: dict[str, Any], headers: Mapping[str, str] | None
) -> None:
    """Let the paused hop go, with `headers` over its own when given; a page or session
    that went meanwhile needs no answer."""
    params: dict[str, Any] = {"requestId": event["requestId"]}
    if headers is not None:
        own: dict[str, str] = event["request"]["headers"]
        kept = {name: value for name, value in own.items() if name.lower() not in headers}
        merged = {**kept, **headers}
        params["headers"] = [{"name": name, "value": value} for name, value in merged.items()]
    with contextlib.suppress(PlaywrightError, TimeoutError):
        await _call(session.send("Fetch.continueRequest", params))


async def _call(step: Awaitable[_T]) -> _T:
    """One DevTools command, within `SESSION_DEADLINE_S`."""
    return await asyncio.wait_for(step, SESSION_DEADLINE_S)
