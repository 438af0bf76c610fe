"""One browser per worker; a context per request; pages pooled within a context.

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
    """A browser context owned by one request; its pages are reused between its URLs."""

    context: BrowserContext
    handle: _BrowserHandle
    pool: BrowserPool
    reuse_limit: int
    idle: list[Page] = field(default_factory=list)
    navigations: dict[Page, int] = field(default_factory=dict)
    opened: set[Page] = field(default_factory=set)
    """Pages of this context not yet closed (rendering or idle)."""

    @property
    def browser_alive(self) -> bool:
        return self.handle.alive

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
        await _close(self.context.close(), "context")
        self.opened.clear()
        self.idle.clear()
        await self.pool.release(self)

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
        self.keep_idle_pages = True
        """Whether a finished page waits for its request's next URL; the memory gate turns
        this off when memory is not comfortable, so a page's renderer is freed at once."""

    async def __aenter__(self) -> Self:
        self._playwright = await async_playwright().start()
        self._executable = find_executable(self._settings, self._playwright.chromium)
        await self._ensure_browser()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        handle, self._current = self._current, None
        if handle is not None:
            await _close(handle.browser.close(), "browser")
        if self._playwright is not None:
            await _close(self._playwright.stop(), "playwright")

    @property
    def generation(self) -> int:
        return self._generation

    def is_ready(self) -> bool:
        """A browser is connected (for `/readyz`)."""
        return self._current is not None and self._current.alive

    async def open_context(self, options: CrawlOptions) -> RequestContext:
        """A fresh, isolated context for one request's pages; the caller closes it."""
        handle = await self._ensure_browser()
        handle.contexts += 1
        try:
            context = await self._new_context(handle, options)
        except BaseException:
            await self._released(handle)
            raise
        opened = RequestContext(
            context=context, handle=handle, pool=self, reuse_limit=self._settings.page_reuse_limit
        )
        self._open.add(opened)
        return opened

    async def release(self, context: RequestContext) -> None:
        """A context closed; a replaced browser closes with its last context."""
        self._open.discard(context)
        await self._released(context.handle)

    async def _released(self, handle: _BrowserHandle) -> None:
        handle.contexts -= 1
        await self._close_if_drained(handle)

    def trim_idle(self) -> None:
        """Close every idle pooled page now (in the background; tasks are kept and reaped)."""
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

    async def _new_context(self, handle: _BrowserHandle, options: CrawlOptions) -> BrowserContext:
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
        if options.block_resources:
            blocked = {str(kind) for kind in options.block_resources}
            await context.route("**/*", _blocking_route(blocked))
        return context

    def _close_popup(self, page: Page) -> None:
        """Pages the worker did not open (window.open, target=_blank) are closed at once."""
        self._spawn(_close_if_popup(page))

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close_if_drained(self, handle: _BrowserHandle) -> None:
        if handle is not self._current and handle.contexts == 0:
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
