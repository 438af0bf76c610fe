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
from typing import TYPE_CHECKING, Final, Self

from playwright.async_api import (
    BrowserContext,
    Page,
    Playwright,
    ProxySettings,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from service.background import Background
from service.browser.context import (
    CLOSE_DEADLINE_S,
    CONTEXT_DEADLINE_S,
    RequestContext,
    _BrowserHandle,
    _nothing,
    answer_dialog,
    close_within,
)
from service.browser.identity import VIEWPORT, context_arguments, context_key, hand_over
from service.browser.launch import CHROMIUM_ARGS, find_executable, keep_driver_compile_cache
from service.browser.navigation import PROBE_SCRIPT
from service.browser.proxy_login import ProxyLogin
from service.browser.sessions import SharedContexts
from service.browser.spares import Spare, SpareContexts
from service.browser.wiped import WipedContexts
from service.errors import BrowserUnavailableError
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine
    from pathlib import Path
    from types import TracebackType

    from playwright.async_api import Request as PlaywrightRequest
    from playwright.async_api import Response, Route

    from service.browser.network_state import RequestWatch
    from service.contracts import CrawlOptions
    from service.egress.auth import ProxyAccess, ProxyCredential
    from service.settings import Settings

log = get_logger(__name__)

LAUNCH_DEADLINE_S: Final = 60.0
"""How long Chromium may take to start."""

PROXY_LOOPBACK_TOO: Final = "<-loopback>"
"""Chromium's bypass rule that sends loopback targets through the proxy as well."""


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
        keep_driver_compile_cache()
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
            await close_within(handle.browser.close(), "browser")
        if self._playwright is not None:
            await close_within(self._playwright.stop(), "playwright")

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
                await close_within(spare.context.close(), "context")
            await self._released(handle)
            raise
        pages = spare.pages if spare is not None else []
        opened = RequestContext(
            context=context,
            handle=handle,
            release=self.release,
            keep_idle_pages=lambda: self.keep_idle_pages,
            reuse_limit=self._settings.page_reuse_limit,
            idle=list(pages),
            opened=set(pages),
            session=session,
            reuse_key=_reuse_key(options),
        )
        opened.unroute = self._route(context, options.proxy)
        opened.seal, opened.unseal = self._seals(context)
        opened.proxy_login = ProxyLogin(self._proxy.login_url if self._proxy else None)
        for page in pages:
            page.on("dialog", answer_dialog)
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
        await close_within(spare.context.close(), "context")
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
            await close_within(handle.browser.close(), "browser")
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


async def _close_if_popup(page: Page) -> None:
    opener = await asyncio.wait_for(page.opener(), CLOSE_DEADLINE_S)
    if opener is not None:
        await close_within(page.close(), "popup")


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
