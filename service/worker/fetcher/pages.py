"""One page at its fetcher: policy -> robots -> pacing -> retries -> a slot -> a render.

The fetcher owns the page's host (the pages topic is keyed by it), so what is kept per host
here holds for the whole group: the per-host limit (the scheduler), `delay_ms` pacing,
robots.txt, the host's backoff after a 429, 503 or challenge page (`Retry-After`: every page
of the host waits, not only the one that was answered) and the `auto` learner.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Final, Protocol

import structlog

from service.background import Background
from service.browser import SettleLimits
from service.browser.render import fetch_page
from service.cache import CachedPage
from service.changes import TrackedPage
from service.content.bound import bounded
from service.content.extract import FollowRules
from service.content.page import failed
from service.contracts import ErrorCode, PageResult, result_id_for, utc_now
from service.errors import BrowserUnavailableError
from service.http.identity import HttpIdentity
from service.http.robots import USER_AGENT
from service.http.static import StaticAnswer
from service.logs import get_logger
from service.net.hosts import host_key
from service.net.policy import BlockedUrlError, UnresolvableHostError
from service.worker.fetcher.retry import PageDeadline, RetryPolicy, retry_reason
from service.worker.fetcher.scheduler import PageTicket

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractContextManager

    from service.browser.context import RequestContext
    from service.browser.pool import BrowserPool
    from service.cache import Validators
    from service.content.page import PageContent
    from service.contracts import CrawlOptions, PageTask
    from service.worker.fetcher.deps import FetcherDeps

log = get_logger(__name__)

BROWSER_ATTEMPTS: Final = 3
"""Tries per page when the browser dies under it; then the page fails `browser_crash`."""

REVALIDATION_BYTES: Final = 1
"""Body bytes a revalidation reads: its status is the answer (a 200 is then fetched in full
by the page's own path)."""

CONTEXT_LINGER_S: Final = 5.0
"""How long a run's browser context stays open here after its pages here ended, while more
may come (the coordinator's next page of the run usually follows within milliseconds); a
run's `last` page hands it back at once."""


class Rendering(Protocol):
    """Counts a page's delivery against it while it renders (`CRAWL_MAX_DELIVERIES`), hears
    when it got its slot (it no longer waits in its partition's queue), and holds its record
    apart while it waits for its host's pace (`pacing`)."""

    @property
    def alone(self) -> bool:
        """The page is a suspect: it renders with no other page of this worker."""

    def started(self) -> None: ...
    def pacing(self) -> AbstractContextManager[None]: ...
    async def begin(self) -> None: ...
    def end(self) -> None: ...


class HostPacer:
    """Spaces the starts of one run's pages of a host by its `delay_ms`."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._next: dict[tuple[str, str], float] = {}

    async def turn(self, run_id: str, host: str, delay_s: float) -> None:
        """Return when a page of `host` may start: `delay_s` after the previous one's turn."""
        if delay_s <= 0:
            return
        now = self._clock()
        self._next = {key: at for key, at in self._next.items() if at > now - delay_s}
        start = max(now, self._next.get((run_id, host), now))
        self._next[(run_id, host)] = start + delay_s
        if start > now:
            await self._sleep(start - now)


HOST_BACKOFF_REASONS: Final = frozenset({"http_429", "http_503", "blocked_by_site"})
"""Answers that speak for the whole host ("come back later"), not for one page."""


class HostBackoff:
    """A host that answered 429, 503 or a challenge page waits, for every page of it on this
    fetcher (which owns the host for the whole group): no page of it starts before the
    wait its answer asked for (`Retry-After`, else the retry policy's) has passed."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._until: dict[str, float] = {}

    def back_off(self, host: str, wait_s: float) -> None:
        """`host` asked to be left alone for `wait_s` (a later answer may extend it)."""
        until = self._clock() + wait_s
        if until > self._until.get(host, 0.0):
            self._until[host] = until

    def waiting_s(self, host: str) -> float:
        """How long a page of `host` must still wait (0: it may start)."""
        until = self._until.get(host)
        if until is None:
            return 0.0
        left = until - self._clock()
        if left <= 0:
            del self._until[host]
            return 0.0
        return left

    async def turn(self, host: str) -> None:
        """Return once `host`'s backoff is over (it may be extended while waiting)."""
        while (left := self.waiting_s(host)) > 0:
            await self._sleep(left)


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


class PageStage:
    """Takes a page task to its content; the caller publishes it."""

    def __init__(
        self,
        deps: FetcherDeps,
        contexts: RunContexts,
        pacer: HostPacer,
        backoff: HostBackoff | None = None,
    ) -> None:
        self._deps = deps
        self._contexts = contexts
        self._pacer = pacer
        self._backoff = backoff or HostBackoff()
        self._retry = RetryPolicy.from_settings(deps.settings)
        self._settle = SettleLimits.from_settings(deps.settings)
        self._charging = Background()

    async def content(
        self, task: PageTask, *, charge: Rendering, partition: int | None = None
    ) -> PageContent:
        """The page's content; the caller holds the run's context (`RunContexts.hold`) from
        before this to after the page's result is published. `partition`: the page
        partition the task's host is placed on, where its cache entry and change history
        live."""
        structlog.contextvars.bind_contextvars(url=task.url, run_id=task.run_id)
        content = await self._cached(task, charge, partition)
        changes = self._deps.changes
        if changes is not None:
            content = await changes.track(TrackedPage(task=task, partition=partition), content)
        return bounded(content, int(self._deps.settings.max_result_bytes))

    async def _cached(
        self, task: PageTask, charge: Rendering, partition: int | None
    ) -> PageContent:
        """The page's content, through the page cache when there is one."""
        content = await self._check_policy(task.url)
        if content is not None:
            return content
        cache = self._deps.cache
        if cache is None:
            return await self._fetched(task, charge)
        page = CachedPage(
            task=task,
            partition=partition,
            follow=_follow_rules(task),
            max_bytes=int(self._deps.settings.max_result_bytes),
        )
        return await cache.content(
            page,
            fetch=lambda: self._fetched(task, charge),
            revalidate=lambda validators: self._revalidate(task, validators),
        )

    async def _fetched(self, task: PageTask, charge: Rendering) -> PageContent:
        """The page from its site: robots.txt first, then tries until an answer holds."""
        content = await self._check_robots(task)
        if content is not None:
            return content
        return await self._fetch_with_retries(task, charge)

    async def _revalidate(self, task: PageTask, validators: Validators) -> int | None:
        """The status of one conditional GET of the page through the egress proxy, in a
        page slot (it counts against the host's limit); None when it got no answer."""
        if await self._check_robots(task) is not None:
            return None
        static = self._deps.static
        if static is None:
            return None
        identity = HttpIdentity(
            headers=tuple(validators.request_headers().items()),
            user_agent=task.options.user_agent,
        )
        timeout_s = min(
            task.options.timeout_ms / 1000, self._deps.settings.max_page_timeout.total_seconds()
        )
        host = host_key(task.url)
        ticket = PageTicket(request=task.run_id, priority=task.priority, host=host)

        async def ask() -> int | None:
            answer = await static.fetch(
                task.url, timeout_s=timeout_s, max_bytes=REVALIDATION_BYTES, identity=identity
            )
            return answer.status if isinstance(answer, StaticAnswer) else None

        return await self._deps.scheduler.run(ask, ticket)

    def _charge_beside(self, charge: Rendering) -> None:
        """Begin committing `charge` without waiting for it (kept until it is done)."""
        self._charging.start(_quietly(charge.begin()))

    def result(self, task: PageTask, content: PageContent, started: float) -> PageResult:
        return PageResult(
            request_id=task.request_id,
            result_id=result_id_for(task.request_id, task.url),
            run_id=task.run_id,
            url=task.url,
            **content.result_fields(),
            elapsed_ms=int((time.monotonic() - started) * 1000),
            fetched_at=utc_now(),
            worker=self._deps.settings.worker_name,
            request_metadata=task.request_metadata,
            source=task.source,
            depth=task.depth,
            parent_url=task.parent_url,
        )

    async def _check_policy(self, url: str) -> PageContent | None:
        try:
            await self._deps.policy.check_target(url)
        except BlockedUrlError as exc:
            return failed(ErrorCode.BLOCKED, str(exc))
        except UnresolvableHostError as exc:
            return failed(ErrorCode.DNS, str(exc))
        except ValueError as exc:
            return failed(ErrorCode.INVALID_URL, str(exc))
        return None

    async def _check_robots(self, task: PageTask) -> PageContent | None:
        if not task.options.respect_robots or await self._deps.robots.allowed(task.url):
            return None
        return failed(ErrorCode.ROBOTS, f"robots.txt disallows {task.url} for {USER_AGENT}")

    async def _fetch_with_retries(self, task: PageTask, charge: Rendering) -> PageContent:
        """Try the page until it succeeds, fails for good, or its retries or time run out;
        the wait between tries happens outside every slot."""
        timeout_s = min(
            task.options.timeout_ms / 1000, self._deps.settings.max_page_timeout.total_seconds()
        )
        deadline = PageDeadline(timeout_s)
        attempt = 0
        while True:
            content = await self._attempt(task, deadline, charge)
            reason = retry_reason(content)
            if reason is None:
                return content
            wait_s = self._retry.delay_s(
                attempt, retry_after_s=content.retry_after_s, remaining_s=deadline.remaining_s()
            )
            if wait_s is None:
                return content
            if reason in HOST_BACKOFF_REASONS:
                self._backoff.back_off(host_key(task.url), wait_s)
            attempt += 1
            self._deps.metrics.page_retries.labels(reason).inc()
            log.info("page.retrying", url=task.url, reason=reason, attempt=attempt, wait_s=wait_s)
            await asyncio.sleep(wait_s)

    async def _attempt(
        self, task: PageTask, deadline: PageDeadline, charge: Rendering
    ) -> PageContent:
        """One try, once the run's pacing for the host allows (waiting for it is not in
        the backlog that pauses intake), in a page slot (the scheduler applies the run's
        share and the host's limit)."""
        host = host_key(task.url)
        scheduler = self._deps.scheduler
        if self._backoff.waiting_s(host) > 0:
            with scheduler.pacing(), charge.pacing():
                await self._backoff.turn(host)
        if task.delay_ms > 0:
            with scheduler.pacing(), charge.pacing():
                await self._pacer.turn(task.run_id, host, task.delay_ms / 1000)
        ticket = PageTicket(
            request=task.run_id, priority=task.priority, host=host, alone=charge.alone
        )

        async def render() -> PageContent:
            # A page that kills its worker is counted while it renders: the count is
            # committed beside the first steps of the render (one round trip, a few ms,
            # before the navigation can have begun to hurt), not before them. A page done
            # before that commit returns gives its slot back at once: it can no longer
            # kill the worker, and the slot must not wait for the broker (on a busy broker
            # a commit takes longer than an HTTP page).
            charge.started()
            self._charge_beside(charge)
            try:
                return await self._render(task, host, deadline.attempt_s())
            finally:
                charge.end()

        return await scheduler.run(render, ticket)

    async def _render(self, task: PageTask, host: str, timeout_s: float) -> PageContent:
        self._deps.metrics.pages_in_flight.inc()
        follow = _follow_rules(task)
        try:
            return await self._deps.renderer.render(
                task.url,
                task.options,
                host=host,
                timeout_s=timeout_s,
                max_bytes=int(self._deps.settings.max_result_bytes),
                follow=follow,
                browser=lambda browser_s: self._browser(task, browser_s, follow),
            )
        finally:
            self._deps.metrics.pages_in_flight.dec()

    async def _browser(
        self, task: PageTask, timeout_s: float, follow: FollowRules | None
    ) -> PageContent:
        last: BrowserUnavailableError | None = None
        for _attempt in range(BROWSER_ATTEMPTS):
            try:
                context = await self._contexts.open(task.run_id, task.options)
                return await fetch_page(
                    context,
                    task.url,
                    task.options,
                    timeout_s=timeout_s,
                    max_result_bytes=int(self._deps.settings.max_result_bytes),
                    refusals=self._deps.refusals,
                    follow=follow,
                    settle=self._settle,
                )
            except BrowserUnavailableError as exc:
                log.warning("page.browser_lost", url=task.url, error=str(exc))
                self._deps.metrics.page_retries.labels("browser").inc()
                last = exc
        return failed(ErrorCode.BROWSER_CRASH, str(last))


def _follow_rules(task: PageTask) -> FollowRules | None:
    """How the page's links are read for a deep crawl (None: it follows none)."""
    if task.follow is None:
        return None
    return FollowRules(respect_nofollow=task.follow.respect_nofollow)


async def _quietly(charging: Awaitable[None]) -> None:
    """A charge's commit; a failed one is logged by the consumer and retried with the next."""
    with contextlib.suppress(Exception):
        await charging
