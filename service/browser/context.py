"""A request's browser context: its pages, their reuse, the wipe between requests.

It knows nothing of the pool that made it: handing it back goes through the `release` it
was given, and whether idle pages are kept through `keep_idle_pages`.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from playwright.async_api import Error as PlaywrightError

from service.browser.network_state import IN_FLIGHT, RequestWatch
from service.browser.proxy_login import ProxyLogin
from service.errors import BrowserUnavailableError
from service.http.robots import Origin
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from playwright.async_api import Browser, BrowserContext, CDPSession, Dialog, Frame, Page

log = get_logger(__name__)

CLOSE_DEADLINE_S: Final = 10.0
"""How long closing a page, a context or a browser may take before it is abandoned."""

CONTEXT_DEADLINE_S: Final = 15.0
"""How long opening a context or a page may take."""

WIPE_DEADLINE_S: Final = 10.0
"""How long wiping a context for its next request may take; past it, it is closed instead."""

SETTLE_DEADLINE_S: Final = 5.0
"""How long a wipe waits for the context's requests in flight (a keepalive fetch, a beacon,
a slow subresource) to end; past it, the context is closed instead (a response that came
after the wipe would leave its cookies to the next request)."""

CLEAR_WINDOW: Final = "() => { window.name = ''; }"
"""`window.name` belongs to the tab, not its document: a page of the next request would read
what the last one set there."""


@dataclass(slots=True, eq=False)
class _BrowserHandle:
    browser: Browser
    generation: int
    contexts: int = 0
    pages_served: int = 0
    retired_for: str | None = None
    """Why it retires (`pages`, `memory`): the `reason` its replacement is counted under;
    None while it is current."""

    @property
    def retiring(self) -> bool:
        return self.retired_for is not None

    @property
    def alive(self) -> bool:
        return self.browser.is_connected()


def _nothing() -> None:
    """A seal of a context that has no egress proxy of its own."""


@dataclass(slots=True, eq=False)
class RequestContext:
    """A browser context owned by one request (or shared by the requests of one `session`);
    its pages are reused between its URLs."""

    context: BrowserContext
    handle: _BrowserHandle
    release: Callable[[RequestContext], Awaitable[None]]
    """Hands the context back to its pool (wiped and kept, or closed)."""
    keep_idle_pages: Callable[[], bool]
    """Whether the pool keeps idle pages open now (memory allows it)."""
    reuse_limit: int
    idle: list[Page] = field(default_factory=list)
    navigations: dict[Page, int] = field(default_factory=dict)
    opened: set[Page] = field(default_factory=set)
    """Pages of this context not yet closed (rendering or idle)."""
    session: str | None = None
    reuse_key: str = ""
    """Contexts are reused only by requests with the same key (what the context blocks)."""
    served: int = 0
    """Requests this context has served (a wiped context serves several, one at a time)."""
    origins: set[str] = field(default_factory=set)
    """Origins a frame of this context has been at since it was last wiped: the storage the
    wipe clears."""
    devtools: dict[Page, CDPSession] = field(default_factory=dict)
    used: set[Page] = field(default_factory=set)
    """Pages handed out since this context was last wiped (the others are still blank)."""
    requests: RequestWatch = field(default_factory=RequestWatch)
    """This context's requests in flight, and why it may not be reused (`network_state`)."""
    seal: Callable[[], None] = _nothing
    """Shuts this context out of the egress proxy (its connections cut, new ones refused)."""
    unseal: Callable[[], None] = _nothing
    """Lets it in again: its next request starts."""
    unroute: Callable[[], None] = _nothing
    """Forgets its upstream proxy at the egress proxy (it is closed)."""
    proxy_login: ProxyLogin = field(default_factory=lambda: ProxyLogin(None))
    """Whether it has logged in to the egress proxy (`proxy_login`)."""

    @property
    def browser_alive(self) -> bool:
        return self.handle.alive

    @property
    def usable(self) -> bool:
        """New requests may use it: its browser is alive and not being replaced."""
        return self.handle.alive and not self.handle.retiring

    @contextlib.asynccontextmanager
    async def page(self) -> AsyncIterator[Page]:
        """A page for one URL; it goes back to the pool only when it was used cleanly."""
        page = self.idle.pop() if self.idle else await self._new_page()
        self.used.add(page)
        clean = False
        try:
            yield page
            clean = True
        finally:
            self.navigations[page] = self.navigations.get(page, 0) + 1
            self.handle.pages_served += 1
            reusable = (
                clean and self.navigations[page] < self.reuse_limit and self.keep_idle_pages()
            )
            if reusable and not page.is_closed():
                self.idle.append(page)
            else:
                await self._close_page(page)

    async def hand_back(self) -> None:
        """The request is done with this context: it is wiped for the next request or closed,
        in the background (a session's closes when its last request is done and it has been
        idle a while); when memory is not comfortable it is closed before this returns."""
        await self.release(self)

    async def shut(self) -> None:
        """Close it now (`hand_back` is how a request lets it go)."""
        self.unseal()  # the proxy forgets the credential
        self.unroute()
        await close_within(self.context.close(), "context")
        self.opened.clear()
        self.idle.clear()
        self.devtools.clear()
        self.used.clear()

    def watch(self, page: Page) -> None:
        """Note every origin `page` (ours, or a popup) and its frames go to."""
        self._saw(page.url)

        def navigated(frame: Frame) -> None:  # a function: Playwright tags its handlers
            self._saw(frame.url)

        page.on("framenavigated", navigated)

    async def wipe(self, keep_pages: int) -> str | None:
        """Make this context look new to its next request, with at most `keep_pages` pages
        (the others are closed: a wiped context waits with its request share, not with every
        page a request borrowed); None when done, else why it cannot be (a page is still
        rendering or was closed mid-use, the browser is going, its network stack remembers
        what no wipe clears, its requests do not end, a step failed): the caller closes it.

        First the context's requests in flight must end (within `SETTLE_DEADLINE_S`), so their
        responses land before the wipe. The kept pages used since the last wipe then go to
        about:blank, so no script of the last request runs any more, and their history and
        window name are reset (the others have been blank since); then cookies, permissions,
        the HTTP cache and the storage of every origin seen (local and session storage,
        IndexedDB, Cache Storage, file systems...) are cleared. What a page sends as it goes
        (a `pagehide` beacon or keepalive fetch) is not seen by DevTools, so before the pages
        leave the context is sealed at the egress proxy (`seal`): its connections are cut and
        new ones refused until the next request takes it, so no answer of the last request's
        can land in it (a site that holds a beacon's `Set-Cookie` back is cut off); cookies are
        cleared once more at hand-over (`BrowserPool.open_context`) all the same.
        """
        pages = list(self.idle)
        if not pages or len(pages) != len(self.opened) or not self.usable:
            return "busy"
        if self.requests.taint is not None:
            return self.requests.taint
        blank = [page for page in pages if page not in self.used]
        used = [page for page in pages if page in self.used][: max(0, keep_pages - len(blank))]
        kept = blank[:keep_pages] + used
        self.used = set()
        try:
            async with asyncio.timeout(WIPE_DEADLINE_S):
                if not await self.requests.settled(SETTLE_DEADLINE_S):
                    return IN_FLIGHT
                self.seal()  # from here on nothing of the last request leaves or lands
                for page in pages:
                    if page not in kept:
                        self.idle.remove(page)
                        await self._close_page(page)
                await asyncio.gather(*(self._blank(page) for page in used))
                if self.requests.taint is not None or self.requests.in_flight:
                    return self.requests.taint or IN_FLIGHT
                await self._clear(kept[0])
        except (PlaywrightError, TimeoutError) as exc:
            log.debug("browser.wipe_failed", error=str(exc))
            return "failed"
        return None

    async def _clear(self, page: Page) -> None:
        """Clear what every page of the context shares (`page`'s DevTools session serves)."""
        devtools = await self._devtools(page)
        origins, self.origins = self.origins, set()
        await asyncio.gather(
            self.context.clear_cookies(),
            self.context.clear_permissions(),
            devtools.send("Network.clearBrowserCache"),
            *(
                devtools.send(
                    "Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"}
                )
                for origin in sorted(origins)
            ),
        )

    async def _blank(self, page: Page) -> None:
        devtools = await self._devtools(page)
        await page.goto("about:blank")
        await page.evaluate(CLEAR_WINDOW)
        await devtools.send("Page.resetNavigationHistory")

    async def _devtools(self, page: Page) -> CDPSession:
        devtools = self.devtools.get(page)
        if devtools is None:
            devtools = self.devtools[page] = await self.context.new_cdp_session(page)
        return devtools

    def _saw(self, url: str) -> None:
        origin = _origin(url)
        if origin is not None:
            self.origins.add(origin)

    async def trim(self) -> None:
        """Close the pages that wait for this request's next URL (memory is short)."""
        idle, self.idle = self.idle, []
        for page in idle:
            await self._close_page(page)

    async def _close_page(self, page: Page) -> None:
        self.navigations.pop(page, None)
        self.devtools.pop(page, None)
        self.used.discard(page)
        try:
            await close_within(page.close(), "page")
        finally:
            self.opened.discard(page)

    async def _new_page(self) -> Page:
        if not self.handle.alive:
            raise BrowserUnavailableError("the browser has died")
        try:
            page = await asyncio.wait_for(self.context.new_page(), CONTEXT_DEADLINE_S)
        except (PlaywrightError, TimeoutError) as exc:
            raise BrowserUnavailableError(f"cannot open a page: {exc}") from exc
        page.on("dialog", answer_dialog)
        self.opened.add(page)
        return page


def _origin(url: str) -> str | None:
    """The origin of an http(s) URL as storage is keyed; None for other URLs (about:blank,
    data:, blob: documents use their creator's origin or an opaque one)."""
    try:
        return Origin.of(url).serialized
    except ValueError:
        return None


async def answer_dialog(dialog: Dialog) -> None:
    """Leave a page that asks (beforeunload); dismiss alert, confirm and prompt."""
    with contextlib.suppress(PlaywrightError):
        if dialog.type == "beforeunload":
            await dialog.accept()
        else:
            await dialog.dismiss()


async def close_within(closing: Awaitable[object], what: str) -> None:
    """Close something of the browser's within a deadline; a dead browser is already closed."""
    try:
        await asyncio.wait_for(closing, CLOSE_DEADLINE_S)
    except (PlaywrightError, TimeoutError) as exc:
        log.debug("browser.close_failed", what=what, error=str(exc))
