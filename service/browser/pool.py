"""One browser per worker; a context per request; pages pooled within a context.

A request gets a context no other request is using: one wiped after an earlier request
(`wiped.py`) when one waits, else a spare opened ahead of need (`spares.py`), else a new one.
When the request is done its context is wiped and kept for the next request (in the
background), or closed. Requests that name the same `session` share one context on purpose
(`sessions.py`). Every context carries the navigation probe (`navigation.py`) from its start.

The browser is replaced without a gap in service after `browser_recycle_pages` pages, on
request (memory growth) or when it dies: new contexts go to the new browser, and the old
one closes once its last context has.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Self

from playwright.async_api import (
    Browser,
    BrowserContext,
    Dialog,
    Page,
    Playwright,
    ProxySettings,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from service.background import Background
from service.browser.identity import VIEWPORT, context_arguments, context_key, hand_over
from service.browser.launch import CHROMIUM_ARGS, find_executable
from service.browser.navigation import PROBE_SCRIPT
from service.browser.network_state import IN_FLIGHT, RequestWatch
from service.browser.sessions import SharedContexts
from service.browser.spares import Spare, SpareContexts
from service.browser.wiped import WipedContexts
from service.errors import BrowserUnavailableError
from service.http.robots import Origin
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
    from pathlib import Path
    from types import TracebackType

    from playwright.async_api import CDPSession, Frame, Response, Route
    from playwright.async_api import Request as PlaywrightRequest

    from service.contracts import CrawlOptions
    from service.egress.auth import ProxyAccess, ProxyCredential
    from service.settings import Settings

log = get_logger(__name__)

LAUNCH_DEADLINE_S: Final = 60.0
"""How long Chromium may take to start."""

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

PROXY_LOOPBACK_TOO: Final = "<-loopback>"
"""Chromium's bypass rule that sends loopback targets through the proxy as well."""


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
    pool: BrowserPool
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
                clean and self.navigations[page] < self.reuse_limit and self.pool.keep_idle_pages
            )
            if reusable and not page.is_closed():
                self.idle.append(page)
            else:
                await self._close_page(page)

    async def hand_back(self) -> None:
        """The request is done with this context: it is wiped for the next request or closed,
        in the background (a session's closes when its last request is done and it has been
        idle a while); when memory is not comfortable it is closed before this returns."""
        await self.pool.release(self)

    async def shut(self) -> None:
        """Close it now (`hand_back` is how a request lets it go)."""
        self.unseal()  # the proxy forgets the credential
        self.unroute()
        await _close(self.context.close(), "context")
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
            await _close(page.close(), "page")
        finally:
            self.opened.discard(page)

    async def _new_page(self) -> Page:
        if not self.handle.alive:
            raise BrowserUnavailableError("the browser has died")
        try:
            page = await asyncio.wait_for(self.context.new_page(), CONTEXT_DEADLINE_S)
        except (PlaywrightError, TimeoutError) as exc:
            raise BrowserUnavailableError(f"cannot open a page: {exc}") from exc
        page.on("dialog", _answer_dialog)
        self.opened.add(page)
        return page


def _origin(url: str) -> str | None:
    """The origin of an http(s) URL as storage is keyed; None for other URLs (about:blank,
    data:, blob: documents use their creator's origin or an opaque one)."""
    try:
        return Origin.of(url).serialized
    except ValueError:
        return None


class BrowserPool:
    """Owns Playwright and the current browser; an async context manager."""

    def __init__(
        self,
        settings: Settings,
        *,
        proxy: ProxyAccess | None = None,
        on_restart: Callable[[str], None] | None = None,
        on_context: Callable[[str], None] | None = None,
    ) -> None:
        self._settings = settings
        self._on_restart = on_restart
        self._on_context = on_context
        """Told where each request's context came from: `wiped`, `spare` or `new`."""
        self._proxy = proxy
        self._playwright: Playwright | None = None
        self._executable: Path | None = None
        self._current: _BrowserHandle | None = None
        self._generation = 0
        self._lock = asyncio.Lock()
        self._tasks = Background()
        self._open: set[RequestContext] = set()
        self._spares = SpareContexts(
            target=settings.spare_contexts,
            open_one=self._open_spare,
            discard=self._discard_spare,
            spawn=self._spawn,
        )
        self._spare_pages = min(settings.max_pages_per_request, settings.max_page_slots)
        self._sessions: SharedContexts[RequestContext] = SharedContexts(
            idle_s=settings.session_idle.total_seconds(), close=self._close_later
        )
        self._session_lock = asyncio.Lock()
        self._wiping = 0
        self._wiped: WipedContexts[RequestContext] = WipedContexts(
            capacity=(
                max(1, settings.max_page_slots // settings.max_pages_per_request)
                if settings.context_reuse > 1
                else 0
            ),
            idle_s=settings.session_idle.total_seconds(),
            close=self._close_later,
        )
        self._handles: dict[int, _BrowserHandle] = {}
        """Browsers by generation while they have contexts (the current one included)."""
        self._credentials: dict[BrowserContext, str] = {}
        """The user name of each open context's proxy credential."""
        self._keep_idle = True

    async def __aenter__(self) -> Self:
        manager = async_playwright()
        self._playwright = await manager.start()
        _watch_driver(manager)
        self._executable = find_executable(self._settings, self._playwright.chromium)
        await self._ensure_browser()
        self._refill()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._spares.stop()
        self._wiped.clear()
        await self._tasks.cancel()
        handle, self._current = self._current, None
        if handle is not None:
            await _close(handle.browser.close(), "browser")
        if self._playwright is not None:
            await _close(self._playwright.stop(), "playwright")

    @property
    def keep_idle_pages(self) -> bool:
        """Whether a finished page waits for its request's next URL and spare contexts are
        kept; the memory gate turns this off when memory is not comfortable, so a page's
        renderer is freed at once, and spares and idle sessions are closed."""
        return self._keep_idle

    @keep_idle_pages.setter
    def keep_idle_pages(self, keep: bool) -> None:
        if self._keep_idle and not keep:
            self._spares.clear()
            self._wiped.clear()
            self._sessions.close_idle()
        self._keep_idle = keep

    @property
    def generation(self) -> int:
        return self._generation

    def is_ready(self) -> bool:
        """A browser is connected (for `/readyz`)."""
        return self._current is not None and self._current.alive

    async def open_context(self, options: CrawlOptions) -> RequestContext:
        """The context for one request's pages; the caller hands it back (`hand_back`) when
        done. Without a `session` it is the request's alone, new or wiped; with one it is the
        session's."""
        key = _session_key(options)
        if key is None:
            wiped = await self._take_wiped(options)
            if wiped is not None:
                self._told("wiped")
                return wiped
            return await self._open_own(options, session=None)
        async with self._session_lock:
            shared = self._sessions.join(key)
            if shared is None:
                shared = await self._open_own(options, session=key)
                self._sessions.add(key, shared)
            return shared

    async def _take_wiped(self, options: CrawlOptions) -> RequestContext | None:
        """A wiped context for the request, its cookies cleared once more: a beacon or a
        keepalive fetch sent as its last request's page went answers after the wipe, and its
        `Set-Cookie` lands then. None when none waits (or clearing failed: it is closed)."""
        while (wiped := self._wiped.take(_reuse_key(options))) is not None:
            try:
                await asyncio.wait_for(wiped.context.clear_cookies(), CONTEXT_DEADLINE_S)
                await asyncio.wait_for(hand_over(wiped.context, options), CONTEXT_DEADLINE_S)
            except (PlaywrightError, TimeoutError) as exc:
                log.debug("browser.context_closed", reason="failed", error=str(exc))
                self._close_later(wiped)
                continue
            wiped.unseal()
            return wiped
        return None

    def _route(self, context: BrowserContext, proxy: str | None) -> Callable[[], None]:
        """Send `context`'s connections through the request's upstream `proxy` (the context
        is reused only by requests naming the same one); returns how to undo it."""
        routes = self._proxy.routes if self._proxy is not None else None
        owner = self._credentials.get(context)
        if proxy is None or routes is None or owner is None:
            return _nothing
        routes.route(owner, proxy)
        return lambda: routes.unroute(owner)

    def _seals(self, context: BrowserContext) -> tuple[Callable[[], None], Callable[[], None]]:
        """`seal` and `unseal` of `context` at the egress proxy (nothing without one)."""
        seals = self._proxy.seals if self._proxy is not None else None
        owner = self._credentials.pop(context, None)
        if seals is None or owner is None:
            return _nothing, _nothing
        return (lambda: seals.seal(owner)), (lambda: seals.unseal(owner))

    async def _open_own(self, options: CrawlOptions, *, session: str | None) -> RequestContext:
        handle = await self._ensure_browser()
        identity = context_key(options)
        spare = self._spares.take(handle.generation) if not identity else None  # spares: default
        if spare is None:
            handle.contexts += 1  # a spare was counted when it was opened
        try:
            context = (
                spare.context if spare is not None else await self._new_context(handle, options)
            )
            await _apply_options(context, options)
        except BaseException:
            if spare is not None:
                await _close(spare.context.close(), "context")
            await self._released(handle)
            raise
        pages = spare.pages if spare is not None else []
        opened = RequestContext(
            context=context,
            handle=handle,
            pool=self,
            reuse_limit=self._settings.page_reuse_limit,
            idle=list(pages),
            opened=set(pages),
            session=session,
            reuse_key=_reuse_key(options),
        )
        opened.unroute = self._route(context, options.proxy)
        opened.seal, opened.unseal = self._seals(context)
        for page in pages:
            page.on("dialog", _answer_dialog)
            opened.watch(page)
        context.on("page", lambda page: opened.watch(page))  # noqa: PLW0108 (see `watch`)
        _watch_requests(context, opened.requests)
        self._open.add(opened)
        if session is None:
            self._told("spare" if spare is not None else "new")
        self._refill()
        return opened

    async def release(self, context: RequestContext) -> None:
        """A request is done with `context`: it is wiped and kept for the next request, in the
        background. While memory is not comfortable it is closed at once instead, so its
        renderers are freed before the run ends and another request's pages take their memory
        (in the background they could overlap them: an OOM under a hard limit)."""
        if self._sessions.owns(context):
            self._sessions.leave(context)
        elif self.keep_idle_pages:
            self._wiping += 1  # counted from now: its task may not have started yet
            self._spawn(self._wipe_or_close(context))
        else:
            self._open.discard(context)
            await self._shut(context)

    async def _wipe_or_close(self, context: RequestContext) -> None:
        """Wipe `context` for the next request, or close it when it has served its share of
        requests, memory is not comfortable or it cannot be wiped (see `RequestContext.wipe`)."""
        context.served += 1
        try:
            refused = await self._wipe(context)
        except Exception:  # task boundary: a context not wiped is closed, never left open
            log.exception("browser.wipe_crashed")
            refused = "crashed"
        finally:
            self._wiping -= 1
        if refused is None:
            log.debug("browser.context_wiped", served=context.served, pages=len(context.idle))
            self._wiped.put(context.reuse_key, context)
        else:
            self._open.discard(context)
            await self._shut(context)
            log.debug("browser.context_closed", served=context.served, reason=refused)

    async def _wipe(self, context: RequestContext) -> str | None:
        """Wipe `context`; None when it may serve the next request, else why not."""
        if context.served >= self._settings.context_reuse:
            return "served"
        if not self.keep_idle_pages:
            return "memory"
        refused = await context.wipe(self._settings.max_pages_per_request)
        return "memory" if refused is None and not self.keep_idle_pages else refused

    @property
    def wiping(self) -> int:
        """Contexts being wiped now, in the background, after their request."""
        return self._wiping

    def _close_later(self, context: RequestContext) -> None:
        self._open.discard(context)
        self._spawn(self._shut(context))

    async def _shut(self, context: RequestContext) -> None:
        try:
            await context.shut()
        finally:
            await self._released(context.handle)

    async def _released(self, handle: _BrowserHandle) -> None:
        handle.contexts -= 1
        await self._close_if_drained(handle)

    def _refill(self) -> None:
        """Open spares only while no wiped context waits: those are cheaper."""
        handle = self._current
        usable = handle is not None and handle.alive and not handle.retiring
        self._spares.refill(allowed=usable and self.keep_idle_pages and self._wiped.ready == 0)

    def _told(self, source: str) -> None:
        log.debug("browser.context_taken", source=source)
        if self._on_context is not None:
            self._on_context(source)

    async def _open_spare(self) -> Spare:
        handle = self._current
        if handle is None or not handle.alive or handle.retiring:
            raise BrowserUnavailableError("no browser takes new contexts")
        handle.contexts += 1
        try:
            context = await self._new_context(handle)
            pages = [await context.new_page() for _ in range(self._spare_pages)]
        except BaseException:
            await self._released(handle)
            raise
        return Spare(context=context, pages=pages, generation=handle.generation)

    async def _discard_spare(self, spare: Spare) -> None:
        self._credentials.pop(spare.context, None)
        await _close(spare.context.close(), "context")
        await self._released_generation(spare.generation)

    def trim_idle(self) -> None:
        """Close every idle pooled page, spare context, wiped context and idle session
        context now (in the background; tasks are kept and reaped)."""
        self._spares.clear()
        self._wiped.clear()
        self._sessions.close_idle()
        for context in list(self._open):
            self._spawn(context.trim())

    @property
    def open_pages(self) -> int:
        """Pages the worker opened and has not closed, over every request's context."""
        return sum(len(context.opened) for context in self._open)

    @property
    def pages_served(self) -> int:
        """Pages served by the current browser."""
        return self._current.pages_served if self._current is not None else 0

    def recycle(self, reason: str, cause: str) -> None:
        """Start the next context on a fresh browser; the current one drains and closes.
        `reason` is logged; the replacement is counted once, under `cause`."""
        handle = self._current
        if handle is not None and not handle.retiring:
            handle.retired_for = cause
            self._spares.clear()
            self._wiped.clear()
            log.info(
                "browser.recycling",
                reason=reason,
                generation=handle.generation,
                pages_served=handle.pages_served,
            )

    async def _ensure_browser(self) -> _BrowserHandle:
        async with self._lock:
            handle = self._current
            if handle is not None and handle.alive and not handle.retiring:
                if handle.pages_served < self._settings.browser_recycle_pages:
                    return handle
                self.recycle("pages", "pages")
            reason = (handle.retired_for or "") if handle is not None else ""
            if handle is not None and not handle.alive:
                reason = "died"
                log.warning("browser.died", generation=handle.generation)
            self._current = await self._launch()
            self._handles[self._current.generation] = self._current
            if handle is not None:
                if self._on_restart is not None:
                    self._on_restart(reason)
                await self._close_if_drained(handle)
            return self._current

    async def _launch(self) -> _BrowserHandle:
        if self._playwright is None:
            raise BrowserUnavailableError("the browser pool is not started")
        try:
            browser = await self._playwright.chromium.launch(
                executable_path=self._executable,
                args=list(CHROMIUM_ARGS),
                headless=True,
                chromium_sandbox=False,
                proxy=_proxy_settings(self._proxy),
                timeout=LAUNCH_DEADLINE_S * 1000,
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
            )
        except PlaywrightError as exc:
            raise BrowserUnavailableError(f"cannot launch Chromium: {exc}") from exc
        self._generation += 1
        log.info("browser.launched", generation=self._generation, version=browser.version)
        return _BrowserHandle(browser=browser, generation=self._generation)

    async def _new_context(
        self, handle: _BrowserHandle, options: CrawlOptions | None = None
    ) -> BrowserContext:
        """A new context with a proxy credential of its own, so the egress proxy knows whose
        each connection is (a fair share of the cap, and a seal while it is wiped), made with
        the request's identity options (`identity.py`; none for a spare)."""
        credential = self._proxy.for_context() if self._proxy is not None else None
        identity = context_arguments(options) if options is not None else {"viewport": VIEWPORT}
        try:
            context = await asyncio.wait_for(
                handle.browser.new_context(
                    **identity,
                    accept_downloads=False,
                    service_workers="block",
                    proxy=_proxy_settings(self._proxy, credential),
                ),
                CONTEXT_DEADLINE_S,
            )
        except (PlaywrightError, TimeoutError) as exc:
            raise BrowserUnavailableError(f"cannot open a context: {exc}") from exc
        if credential is not None:
            self._credentials[context] = credential.username
        context.on("page", self._close_popup)
        await context.add_init_script(PROBE_SCRIPT)
        return context

    def _close_popup(self, page: Page) -> None:
        """Pages the worker did not open (window.open, target=_blank) are closed at once."""
        self._spawn(_close_if_popup(page))

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        self._tasks.start(work)

    async def _released_generation(self, generation: int) -> None:
        handle = self._handles.get(generation)
        if handle is not None:
            await self._released(handle)

    async def _close_if_drained(self, handle: _BrowserHandle) -> None:
        if handle is not self._current and handle.contexts == 0:
            self._handles.pop(handle.generation, None)
            await _close(handle.browser.close(), "browser")
            log.info("browser.closed", generation=handle.generation)


def _watch_requests(context: BrowserContext, watch: RequestWatch) -> None:
    """Feed `watch` every request of `context` (functions: Playwright tags its handlers)."""

    def started(request: PlaywrightRequest) -> None:
        watch.started(request)

    def answered(response: Response) -> None:
        watch.answered(response)

    def ended(request: PlaywrightRequest) -> None:
        watch.ended(request)

    context.on("request", started)
    context.on("response", answered)
    context.on("requestfinished", ended)
    context.on("requestfailed", ended)


def _proxy_settings(
    proxy: ProxyAccess | None, credential: ProxyCredential | None = None
) -> ProxySettings | None:
    """Playwright's proxy settings: every request through the proxy, with `credential` (the
    worker's by default; Playwright answers the proxy's 407 challenge, Chromium then sends it
    unasked)."""
    if proxy is None:
        return None
    chosen = credential or proxy.credential
    return {
        "server": proxy.url,
        "bypass": PROXY_LOOPBACK_TOO,
        "username": chosen.username,
        "password": chosen.password,
    }


def _session_key(options: CrawlOptions) -> str | None:
    """Which shared context a request uses: its session's, one per set of blocked resource
    types and identity options (settings of the whole context); None: a context of its own."""
    if options.session is None:
        return None
    blocked = sorted(str(kind) for kind in options.block_resources)
    identity = context_key(options)
    return "\n".join([options.session, *blocked, *([identity] if identity else [])])


def _reuse_key(options: CrawlOptions) -> str:
    """Which wiped contexts a request may take: those blocking the same resource types, made
    with equal identity options (a request without any: the key it always had)."""
    blocked = ",".join(sorted(str(kind) for kind in options.block_resources))
    identity = context_key(options)
    return f"{blocked}\n{identity}" if identity else blocked


async def _apply_options(context: BrowserContext, options: CrawlOptions) -> None:
    """What a request asks of its whole context: resource types not loaded, its cookies and
    permissions."""
    await hand_over(context, options)
    if options.block_resources:
        blocked = {str(kind) for kind in options.block_resources}
        await context.route("**/*", _blocking_route(blocked))


def _blocking_route(blocked: set[str]) -> Callable[[Route], Awaitable[None]]:
    async def route(route: Route) -> None:
        if route.request.resource_type in blocked:
            await route.abort("blockedbyclient")
        else:
            await route.continue_()

    return route


async def _answer_dialog(dialog: Dialog) -> None:
    """Leave a page that asks (beforeunload); dismiss alert, confirm and prompt."""
    with contextlib.suppress(PlaywrightError):
        if dialog.type == "beforeunload":
            await dialog.accept()
        else:
            await dialog.dismiss()


async def _close_if_popup(page: Page) -> None:
    opener = await asyncio.wait_for(page.opener(), CLOSE_DEADLINE_S)
    if opener is not None:
        await _close(page.close(), "popup")


def _watch_driver(manager: object) -> None:
    """Hear when Playwright's driver goes away. Playwright puts the driver's failure on a
    future that nothing awaits once it has started: a driver that dies (a signal to the
    whole process group at shutdown, an OOM kill) left `Future exception was never
    retrieved ... Connection closed while reading from the driver` in the log. The failure
    is read here and logged as what it is; the browser calls in flight fail on their own."""
    client = getattr(manager, "_client", None)  # Playwright's own names; absent: no watch
    errors = getattr(getattr(client, "_transport", None), "on_error_future", None)
    if isinstance(errors, asyncio.Future):
        errors.add_done_callback(_driver_lost)


def _driver_lost(errors: asyncio.Future[object]) -> None:
    if not errors.cancelled() and (error := errors.exception()) is not None:
        log.warning("browser.driver_lost", error=str(error))


async def _close(closing: Awaitable[object], what: str) -> None:
    """Close something of the browser's within a deadline; a dead browser is already closed."""
    try:
        await asyncio.wait_for(closing, CLOSE_DEADLINE_S)
    except (PlaywrightError, TimeoutError) as exc:
        log.debug("browser.close_failed", what=what, error=str(exc))
