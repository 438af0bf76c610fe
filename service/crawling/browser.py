"""One browser per worker; a context per request; pages pooled within a context.

A request gets a context of its own, taken from the spares opened ahead of need when one is
ready (`_spares.py`), and closed in the background when the request is done. Requests that name
the same `session` share one context on purpose (`_sessions.py`). Every context carries the
navigation probe (`_navigation.py`) from its start.

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

from service.crawling._navigation import PROBE_SCRIPT
from service.crawling._sessions import SharedContexts
from service.crawling._spares import Spare, SpareContexts
from service.crawling.launch import CHROMIUM_ARGS, find_executable
from service.errors import BrowserUnavailableError
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
    from pathlib import Path
    from types import TracebackType

    from playwright.async_api import Route

    from service.contracts import CrawlOptions
    from service.crawling._proxy_auth import ProxyAccess
    from service.settings import Settings

log = get_logger(__name__)

LAUNCH_DEADLINE_S: Final = 60.0
"""How long Chromium may take to start."""

CLOSE_DEADLINE_S: Final = 10.0
"""How long closing a page, a context or a browser may take before it is abandoned."""

CONTEXT_DEADLINE_S: Final = 15.0
"""How long opening a context or a page may take."""

VIEWPORT: Final = {"width": 1280, "height": 800}

PROXY_LOOPBACK_TOO: Final = "<-loopback>"
"""Chromium's bypass rule that sends loopback targets through the proxy as well."""


@dataclass(slots=True, eq=False)
class _BrowserHandle:
    browser: Browser
    generation: int
    contexts: int = 0
    pages_served: int = 0
    retiring: bool = False

    @property
    def alive(self) -> bool:
        return self.browser.is_connected()


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

    async def close(self) -> None:
        """The request is done with this context: it closes in the background (a session's
        when its last request is done and it has been idle a while), or before this returns
        when memory is not comfortable."""
        await self.pool.release(self)

    async def shut(self) -> None:
        await _close(self.context.close(), "context")
        self.opened.clear()
        self.idle.clear()

    async def trim(self) -> None:
        """Close the pages that wait for this request's next URL (memory is short)."""
        idle, self.idle = self.idle, []
        for page in idle:
            await self._close_page(page)

    async def _close_page(self, page: Page) -> None:
        self.navigations.pop(page, None)
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


class BrowserPool:
    """Owns Playwright and the current browser; an async context manager."""

    def __init__(
        self,
        settings: Settings,
        *,
        proxy: ProxyAccess | None = None,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self._settings = settings
        self._on_restart = on_restart
        self._proxy = proxy
        self._playwright: Playwright | None = None
        self._executable: Path | None = None
        self._current: _BrowserHandle | None = None
        self._generation = 0
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
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
        self._handles: dict[int, _BrowserHandle] = {}
        """Browsers by generation while they have contexts (the current one included)."""
        self._keep_idle = True

    async def __aenter__(self) -> Self:
        self._playwright = await async_playwright().start()
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
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
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
            self._sessions.close_idle()
        self._keep_idle = keep

    @property
    def generation(self) -> int:
        return self._generation

    def is_ready(self) -> bool:
        """A browser is connected (for `/readyz`)."""
        return self._current is not None and self._current.alive

    async def open_context(self, options: CrawlOptions) -> RequestContext:
        """The context for one request's pages; the caller `close`s it when done. Without a
        `session` it is fresh and the request's alone; with one it is the session's."""
        key = _session_key(options)
        if key is None:
            return await self._open_own(options, session=None)
        async with self._session_lock:
            shared = self._sessions.join(key)
            if shared is None:
                shared = await self._open_own(options, session=key)
                self._sessions.add(key, shared)
            return shared

    async def _open_own(self, options: CrawlOptions, *, session: str | None) -> RequestContext:
        handle = await self._ensure_browser()
        spare = self._spares.take(handle.generation)
        if spare is None:
            handle.contexts += 1  # a spare was counted when it was opened
        try:
            context = spare.context if spare is not None else await self._new_context(handle)
            await _apply_options(context, options)
        except BaseException:
            if spare is not None:
                await _close(spare.context.close(), "context")
            await self._released(handle)
            raise
        pages = spare.pages if spare is not None else []
        for page in pages:
            page.on("dialog", _answer_dialog)
        opened = RequestContext(
            context=context,
            handle=handle,
            pool=self,
            reuse_limit=self._settings.page_reuse_limit,
            idle=list(pages),
            opened=set(pages),
            session=session,
        )
        self._open.add(opened)
        self._refill()
        return opened

    async def release(self, context: RequestContext) -> None:
        """A request is done with `context`. While memory is not comfortable it is closed
        at once, so its renderers are freed before the run ends and another request's pages
        take their memory (in the background they could overlap them: an OOM under a hard
        limit)."""
        if self._sessions.owns(context):
            self._sessions.leave(context)
        elif self.keep_idle_pages:
            self._close_later(context)
        else:
            self._open.discard(context)
            await self._shut(context)

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
        handle = self._current
        usable = handle is not None and handle.alive and not handle.retiring
        self._spares.refill(allowed=usable and self.keep_idle_pages)

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
        await _close(spare.context.close(), "context")
        await self._released_generation(spare.generation)

    def trim_idle(self) -> None:
        """Close every idle pooled page, spare context and idle session context now (in the
        background; tasks are kept and reaped)."""
        self._spares.clear()
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

    def recycle(self, reason: str) -> None:
        """Start the next context on a fresh browser; the current one drains and closes."""
        handle = self._current
        if handle is not None and not handle.retiring:
            handle.retiring = True
            self._spares.clear()
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
                self.recycle("pages")
            reason = "recycled"
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

    async def _new_context(self, handle: _BrowserHandle) -> BrowserContext:
        try:
            context = await asyncio.wait_for(
                handle.browser.new_context(
                    viewport=VIEWPORT,  # type: ignore[arg-type]
                    accept_downloads=False,
                    service_workers="block",
                ),
                CONTEXT_DEADLINE_S,
            )
        except (PlaywrightError, TimeoutError) as exc:
            raise BrowserUnavailableError(f"cannot open a context: {exc}") from exc
        context.on("page", self._close_popup)
        await context.add_init_script(PROBE_SCRIPT)
        return context

    def _close_popup(self, page: Page) -> None:
        """Pages the worker did not open (window.open, target=_blank) are closed at once."""
        self._spawn(_close_if_popup(page))

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _released_generation(self, generation: int) -> None:
        handle = self._handles.get(generation)
        if handle is not None:
            await self._released(handle)

    async def _close_if_drained(self, handle: _BrowserHandle) -> None:
        if handle is not self._current and handle.contexts == 0:
            self._handles.pop(handle.generation, None)
            await _close(handle.browser.close(), "browser")
            log.info("browser.closed", generation=handle.generation)


def _proxy_settings(proxy: ProxyAccess | None) -> ProxySettings | None:
    """Playwright's proxy settings: every request through the proxy, with its credential
    (Playwright answers the proxy's 407 challenge; Chromium then sends it unasked)."""
    if proxy is None:
        return None
    return {
        "server": proxy.url,
        "bypass": PROXY_LOOPBACK_TOO,
        "username": proxy.credential.username,
        "password": proxy.credential.password,
    }


def _session_key(options: CrawlOptions) -> str | None:
    """Which shared context a request uses: its session's, one per set of blocked resource
    types (blocking is a setting of the whole context); None: a context of its own."""
    if options.session is None:
        return None
    return "\n".join([options.session, *sorted(str(kind) for kind in options.block_resources)])


async def _apply_options(context: BrowserContext, options: CrawlOptions) -> None:
    """What a request asks of its whole context: resource types not loaded."""
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


async def _close(closing: Awaitable[object], what: str) -> None:
    """Close something of the browser's within a deadline; a dead browser is already closed."""
    try:
        await asyncio.wait_for(closing, CLOSE_DEADLINE_S)
    except (PlaywrightError, TimeoutError) as exc:
        log.debug("browser.close_failed", what=what, error=str(exc))
