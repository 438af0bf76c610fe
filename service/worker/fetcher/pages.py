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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import structlog

from service.background import Background
from service.cache import CachedPage
from service.changes import TrackedPage
from service.content.bound import bounded
from service.content.extract import FollowRules
from service.content.page import failed
from service.contracts import ErrorCode, PageResult, result_id_for, utc_now
from service.http.identity import HttpIdentity
from service.http.robots import USER_AGENT
from service.http.static import StaticAnswer
from service.logs import get_logger
from service.net.hosts import host_key
from service.net.policy import BlockedUrlError, UnresolvableHostError
from service.paths import PageToRender
from service.worker.fetcher.politeness import (
    HOST_BACKOFF_REASONS,
    HostBackoff,
    HostPacer,
    PaceTurn,
)
from service.worker.fetcher.retry import PageDeadline, RetryPolicy, retry_reason
from service.worker.fetcher.scheduler import PageTicket

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from contextlib import AbstractContextManager

    from service.cache import Validators
    from service.content.page import PageContent
    from service.contracts import PageTask
    from service.settings import Settings
    from service.worker.fetcher.deps import FetcherDeps

log = get_logger(__name__)

REVALIDATION_BYTES: Final = 1
"""Body bytes a revalidation reads: its status is the answer (a 200 is then fetched in full
by the page's own path)."""


class PageCharge(Protocol):
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


@dataclass(frozen=True, slots=True, kw_only=True)
class PageLimits:
    """What the page stage reads of the settings."""

    max_result_bytes: int
    max_page_timeout_s: float
    worker_name: str

    @classmethod
    def from_settings(cls, settings: Settings) -> PageLimits:
        return cls(
            max_result_bytes=int(settings.max_result_bytes),
            max_page_timeout_s=settings.max_page_timeout.total_seconds(),
            worker_name=settings.worker_name,
        )

    def timeout_s(self, task: PageTask) -> float:
        """The page's time: what its request asked for, at most the cluster's bound."""
        return min(task.options.timeout_ms / 1000, self.max_page_timeout_s)


class PageStage:
    """Takes a page task to its content; the caller publishes it."""

    def __init__(
        self, deps: FetcherDeps, pacer: HostPacer, backoff: HostBackoff | None = None
    ) -> None:
        self._deps = deps
        self._pacer = pacer
        self._backoff = backoff or HostBackoff()
        self._retry = RetryPolicy.from_settings(deps.settings)
        self._limits = PageLimits.from_settings(deps.settings)
        self._charging = Background()

    async def content(
        self, task: PageTask, *, charge: PageCharge, partition: int | None = None
    ) -> PageContent:
        """The page's content; the caller holds the run's context (`deps.contexts.hold`) from
        before this to after the page's result is published. `partition`: the page
        partition the task's host is placed on, where its cache entry and change history
        live."""
        structlog.contextvars.bind_contextvars(url=task.url, run_id=task.run_id)
        content = await self._cached(task, charge, partition)
        changes = self._deps.changes
        if changes is not None:
            content = await changes.track(TrackedPage(task=task, partition=partition), content)
        return bounded(content, self._limits.max_result_bytes)

    async def _cached(
        self, task: PageTask, charge: PageCharge, partition: int | None
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
            max_bytes=self._limits.max_result_bytes,
        )
        return await cache.content(
            page,
            fetch=lambda: self._fetched(task, charge),
            revalidate=lambda validators: self._revalidate(task, validators),
        )

    async def _fetched(self, task: PageTask, charge: PageCharge) -> PageContent:
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
        timeout_s = self._limits.timeout_s(task)
        host = host_key(task.url)
        ticket = PageTicket(run=task.run_id, priority=task.priority, host=host)

        async def ask() -> int | None:
            answer = await static.fetch(
                task.url, timeout_s=timeout_s, max_bytes=REVALIDATION_BYTES, identity=identity
            )
            return answer.status if isinstance(answer, StaticAnswer) else None

        return await self._deps.scheduler.run(ask, ticket)

    def _charge_beside(self, charge: PageCharge) -> None:
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
            worker=self._limits.worker_name,
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

    async def _fetch_with_retries(self, task: PageTask, charge: PageCharge) -> PageContent:
        """Try the page until it succeeds, fails for good, or its retries or time run out;
        the wait between tries happens outside every slot."""
        timeout_s = self._limits.timeout_s(task)
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
        self, task: PageTask, deadline: PageDeadline, charge: PageCharge
    ) -> PageContent:
        """One try, once the run's pacing for the host allows (waiting for it is not in
        the backlog that pauses intake), in a page slot (the scheduler applies the run's
        share and the host's limit)."""
        host = host_key(task.url)
        scheduler = self._deps.scheduler
        if self._backoff.waiting_s(host) > 0:
            with scheduler.pacing(), charge.pacing():
                await self._backoff.turn(host)
        turn = PaceTurn()
        if task.delay_ms > 0:
            with scheduler.pacing(), charge.pacing():
                turn = await self._pacer.turn(task.run_id, host, task.delay_ms / 1000)
        ticket = PageTicket(run=task.run_id, priority=task.priority, host=host, alone=charge.alone)

        async def render() -> PageContent:
            # A page that kills its worker is counted while it renders: the count is
            # committed beside the first steps of the render (one round trip, a few ms,
            # before the navigation can have begun to hurt), not before them. A page done
            # before that commit returns gives its slot back at once: it can no longer
            # kill the worker, and the slot must not wait for the broker (on a busy broker
            # a commit takes longer than an HTTP page).
            turn.started()
            charge.started()
            self._charge_beside(charge)
            try:
                return await self._render(task, host, deadline.attempt_s())
            finally:
                charge.end()

        try:
            return await scheduler.run(render, ticket)
        finally:
            turn.give_up()

    async def _render(self, task: PageTask, host: str, timeout_s: float) -> PageContent:
        self._deps.metrics.pages_in_flight.inc()
        page = PageToRender(
            url=task.url,
            options=task.options,
            run_id=task.run_id,
            host=host,
            max_bytes=self._limits.max_result_bytes,
            follow=_follow_rules(task),
        )
        try:
            return await self._deps.renderer.render(page, timeout_s)
        finally:
            self._deps.metrics.pages_in_flight.dec()


def _follow_rules(task: PageTask) -> FollowRules | None:
    """How the page's links are read for a deep crawl (None: it follows none)."""
    if task.follow is None:
        return None
    return FollowRules(respect_nofollow=task.follow.respect_nofollow)


async def _quietly(charging: Awaitable[None]) -> None:
    """A charge's commit; a failed one is logged by the consumer and retried with the next."""
    with contextlib.suppress(Exception):
        await charging
