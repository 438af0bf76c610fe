"""The browser path: a page rendered in its run's browser context, tried again when the
browser dies under it.

Each run has one context on this fetcher, shared by its pages here (`RunContexts`); the
renderer (`renderer.py`) is built with this path and the HTTP one and picks per page.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from service.background import Background
from service.browser import SettleLimits
from service.browser.render import render_page
from service.content.page import failed
from service.contracts import ErrorCode
from service.errors import BrowserUnavailableError
from service.logs import get_logger

if TYPE_CHECKING:
    from service.browser.context import RequestContext
    from service.browser.pool import BrowserPool
    from service.content.extract import FollowRules
    from service.content.page import PageContent
    from service.contracts import CrawlOptions
    from service.egress.refusals import RefusedTargets
    from service.metrics import Metrics
    from service.settings import Settings

log = get_logger(__name__)

BROWSER_ATTEMPTS: Final = 3
"""Tries per page when the browser dies under it; then the page fails `browser_crash`."""

CONTEXT_LINGER_S: Final = 5.0
"""How long a run's browser context stays open here after its pages here ended, while more
may come (the coordinator's next page of the run usually follows within milliseconds); a
run's `last` page hands it back at once."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PageToRender:
    """One page as its request asked for it, and what its render may use."""

    url: str
    options: CrawlOptions
    run_id: str
    """The run whose browser context the page renders in."""
    host: str
    """The page's key for the per-host limit; the learned path decisions are kept by it."""
    max_bytes: int
    follow: FollowRules | None
    """How its links are read for a deep crawl (None: it follows none)."""


class _Held:
    __slots__ = ("closer", "context", "final", "lock", "users")

    def __init__(self) -> None:
        self.context: RequestContext | None = None
        self.lock = asyncio.Lock()
        self.users = 0
        self.closer: asyncio.TimerHandle | None = None
        self.final = False
        """The run's last page came here: hand back without lingering."""


class RunContexts:
    """One browser context per run on this fetcher, shared by the run's pages here, and
    handed back (wiped, or closed) `CONTEXT_LINGER_S` after its last page."""

    def __init__(self, pool: BrowserPool, linger_s: float = CONTEXT_LINGER_S) -> None:
        self._pool = pool
        self._linger_s = linger_s
        self._held: dict[str, _Held] = {}
        self._closing = Background()

    def hold(self, run_id: str, *, last: bool = False) -> None:
        held = self._held.setdefault(run_id, _Held())
        held.users += 1
        held.final = held.final or last
        if held.closer is not None:
            held.closer.cancel()
            held.closer = None

    def holders(self, run_id: str) -> int:
        """Pages of the run holding its context now."""
        held = self._held.get(run_id)
        return 0 if held is None else held.users

    def release(self, run_id: str) -> None:
        held = self._held.get(run_id)
        if held is None:
            return
        held.users -= 1
        if held.users <= 0:
            if held.final:  # no page of the run comes after: the next run may have it now
                self._close_later(run_id)
                return
            loop = asyncio.get_running_loop()
            held.closer = loop.call_later(self._linger_s, self._close_later, run_id)

    async def open(self, run_id: str, options: CrawlOptions) -> RequestContext:
        held = self._held.setdefault(run_id, _Held())
        async with held.lock:
            if held.context is None or not held.context.browser_alive:
                old, held.context = held.context, None
                if old is not None:
                    await old.hand_back()
                held.context = await self._pool.open_context(options)
            return held.context

    def _close_later(self, run_id: str) -> None:
        held = self._held.get(run_id)
        if held is None or held.users > 0:
            return
        del self._held[run_id]
        if held.context is not None:
            self._closing.start(held.context.hand_back())

    async def close_all(self) -> None:
        held, self._held = list(self._held.values()), {}
        for entry in held:
            if entry.closer is not None:
                entry.closer.cancel()
            if entry.context is not None:
                await entry.context.hand_back()
        await self._closing.wait()


class BrowserPath:
    """Renders a page in its run's context; a browser that dies under the page is replaced
    and the page tried again, `BROWSER_ATTEMPTS` times in all."""

    def __init__(
        self,
        contexts: RunContexts,
        metrics: Metrics,
        *,
        refusals: RefusedTargets | None,
        settle: SettleLimits,
    ) -> None:
        self.contexts = contexts
        self._metrics = metrics
        self._refusals = refusals
        self._settle = settle

    @classmethod
    def from_settings(
        cls,
        contexts: RunContexts,
        settings: Settings,
        metrics: Metrics,
        refusals: RefusedTargets | None,
    ) -> BrowserPath:
        settle = SettleLimits.from_settings(settings)
        return cls(contexts, metrics, refusals=refusals, settle=settle)

    async def render(self, page: PageToRender, timeout_s: float) -> PageContent:
        last: BrowserUnavailableError | None = None
        for _attempt in range(BROWSER_ATTEMPTS):
            try:
                context = await self.contexts.open(page.run_id, page.options)
                return await render_page(
                    context,
                    page.url,
                    page.options,
                    timeout_s=timeout_s,
                    max_result_bytes=page.max_bytes,
                    refusals=self._refusals,
                    follow=page.follow,
                    settle=self._settle,
                )
            except BrowserUnavailableError as exc:
                log.warning("page.browser_lost", url=page.url, error=str(exc))
                self._metrics.page_retries.labels("browser").inc()
                last = exc
        return failed(ErrorCode.BROWSER_CRASH, str(last))
