"""The fetcher's side of a page: one page record of the pages topic to its result.

Per record: the task is read (one that is not a task goes to the dead letters), a record
delivered too often to fetchers that died rendering it is answered with a `poison` result,
a page of a cancelled run or past its run's deadline gets that result at once, and any
other is rendered (`pages.py`). Its `PageResult` is published and acknowledged, then its
`page` frontier record (outcome and, for a deep crawl, links); only then does the record's
offset finish, so a fetcher that dies anywhere before leaves the page to the next owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections import Counter
from typing import TYPE_CHECKING, Final, Protocol

import structlog
from pydantic import ValidationError

from service.background import Background
from service.content.page import failed
from service.contracts import (
    DeadLetterCode,
    ErrorCode,
    FrontierRecord,
    PageTask,
    dump,
    utc_now,
)
from service.control.stop import Stop
from service.errors import RejectedMessageError
from service.frontier.plan import MAX_LINKS_SCANNED
from service.logs import get_logger
from service.messaging.dead_letter import send_dead_letter
from service.messaging.offsets import Verdict
from service.messaging.outbox import Outbox
from service.messaging.publisher import JSON_HEADERS
from service.messaging.seal import Seal
from service.worker.fetcher.deps import FetcherLimits
from service.worker.fetcher.lane import LaneRecords
from service.worker.fetcher.pages import PageCharge, PageStage
from service.worker.fetcher.politeness import HostPacer

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from aiokafka import ConsumerRecord

    from service.content.page import PageContent
    from service.contracts import PageResult
    from service.control import ActiveRuns, Cancel
    from service.frontier.tail import FrontierTail
    from service.messaging.offsets import Delivery
    from service.paths.browser_path import RunContexts
    from service.worker.fetcher.deps import FetcherDeps
    from service.worker.fetcher.scheduler import PageScheduler

log = get_logger(__name__)


STALE_WAITERS: Final = 64
"""Waiters for room kept before those that gave up are dropped from the heap."""


class Deliveries(Protocol):
    """The pages consumer's delivery counts (`RecordConsumer.charge` and `relieve`), and
    its records set aside while they wait for their host's pace (`set_aside`)."""

    async def charge(self, record: ConsumerRecord[bytes, bytes], *, alone: bool) -> None: ...
    def relieve(self, record: ConsumerRecord[bytes, bytes]) -> None: ...
    def set_aside(self, record: ConsumerRecord[bytes, bytes]) -> None: ...
    def taken_back(self, record: ConsumerRecord[bytes, bytes]) -> None: ...


class _Charge:
    """A page's delivery counts against its record only while the page renders; while it
    waits for its host's pace, its record is set aside (read past, out of its partition's
    queue)."""

    def __init__(
        self,
        deliveries: Deliveries,
        record: ConsumerRecord[bytes, bytes],
        backlog: _Backlog,
        *,
        suspect: bool = False,
    ) -> None:
        self._deliveries = deliveries
        self._record = record
        self._backlog = backlog
        self.alone = suspect
        """A suspect renders alone, and a death then is counted against it; any other
        page renders beside others, and a death only makes it a suspect."""

    def started(self) -> None:
        self._backlog.rendering()

    @contextlib.contextmanager
    def pacing(self) -> Iterator[None]:
        self._deliveries.set_aside(self._record)
        try:
            with self._backlog.aside():
                yield
        finally:
            self._deliveries.taken_back(self._record)

    async def begin(self) -> None:
        await self._deliveries.charge(self._record, alone=self.alone)

    def end(self) -> None:
        self._deliveries.relieve(self._record)


class _NoCharge:
    """A local page has no record to count its render against."""

    alone = False

    def started(self) -> None:
        return None

    def pacing(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    async def begin(self) -> None:
        return None

    def end(self) -> None:
        return None


_NO_CHARGE: Final = _NoCharge()


class _Backlog:
    """A taken page in the scheduler's count until it has its content (not while its
    result is published: on a busy broker that takes as long as an HTTP page renders, and
    intake paused on pages that only waited for acknowledgements); a page record's also in
    its partition's queue until it gets a slot."""

    def __init__(
        self,
        scheduler: PageScheduler,
        on_leave: Callable[[], None],
        queues: Counter[int] | None = None,
        partition: int = -1,
    ) -> None:
        self._scheduler = scheduler
        self._on_leave = on_leave
        self._in = True
        scheduler.accept(1)
        self._queues = queues
        self._partition = partition
        self._queued = False
        """Counted in its partition's queue now."""
        self._enter()

    @contextlib.contextmanager
    def aside(self) -> Iterator[None]:
        """The page waits for its host's pace: out of its partition's queue meanwhile (it is
        no work a slot could start, so the partition is read on)."""
        was = self._queued
        self._exit()
        try:
            yield
        finally:
            if was:
                self._enter()

    def rendering(self) -> None:
        """The page got a slot: out of its partition's queue for good."""
        self._exit()
        self._queues = None

    def _enter(self) -> None:
        if self._queues is not None and not self._queued:
            self._queues[self._partition] += 1
            self._queued = True

    def _exit(self) -> None:
        if self._queues is not None and self._queued:
            self._queues[self._partition] -= 1
            if self._queues[self._partition] <= 0:
                del self._queues[self._partition]
            self._queued = False

    def leave(self) -> None:
        self.rendering()
        if self._in:
            self._in = False
            self._scheduler.finished(1)
            self._on_leave()


class _Told:
    """Whether the coordinator in this process has been given the page's outcome."""

    __slots__ = ("coordinator",)

    def __init__(self) -> None:
        self.coordinator = False


class _PageStop:
    """A page rendering here that a cancel or its run's deadline stops."""

    def __init__(self) -> None:
        self.stop: Stop | None = None
        self.task: asyncio.Task[PageContent] | None = None
        self.halted = asyncio.Event()

    def cancel(self, cancel: Cancel) -> None:
        self.halt(Stop.cancelled(cancel))

    def halt(self, stop: Stop) -> None:
        if self.stop is None:
            self.stop = stop
            self.halted.set()
            if self.task is not None:
                self.task.cancel()


class Fetcher:
    """Handles the page records of the partitions this worker owns in the fetcher group."""

    def __init__(
        self,
        deps: FetcherDeps,
        active: ActiveRuns,
        deliveries: Deliveries,
        local_tail: FrontierTail | None = None,
    ) -> None:
        self._deps = deps
        self._local_tail = local_tail
        """The coordinator's tail in this process (role `all`): outcomes go to it at once."""
        self._active = active
        self._deliveries = deliveries
        self.contexts = deps.contexts
        self.scheduler = deps.scheduler
        self.limits = FetcherLimits.from_settings(deps.settings)
        self._leaving: list[tuple[int, int, asyncio.Future[None]]] = []
        """Waiting for a page to leave the backlog (`backlog_left`): a heap by priority."""
        self._asked = 0
        self._queues: Counter[int] = Counter()
        """Page records of each partition taken and waiting for a slot (`queued`)."""
        self._stage = PageStage(deps, HostPacer())
        self._ending = Background()
        """Stopped pages still closing (their page in Chromium, their slot): their results
        are out, their run's context is handed back once they have closed."""
        self._seal = deps.seal or Seal.from_settings(deps.settings)
        self.lane_records = LaneRecords(
            deps.publisher, self.limits.frontier_topic, on_resend=deps.metrics.publish_retries.inc
        )

    async def close(self) -> None:
        """Write the local pages' records still waiting, hand the browser contexts back."""
        await self.lane_records.flush()
        await self._ending.wait()  # each within the browser's close deadline
        await self.contexts.close_all()

    async def handle(
        self, record: ConsumerRecord[bytes, bytes], delivery: Delivery, owned: asyncio.Event
    ) -> None:
        """Take one page record to its end: an answered page or a dead letter."""
        backlog = _Backlog(  # before any await: polls see it
            self._deps.scheduler, self._left, self._queues, record.partition
        )
        try:
            await self._handle(record, delivery, owned, backlog)
        except Exception as exc:  # the record's error boundary
            log.exception("page.crashed", error=repr(exc))
            error = RejectedMessageError(
                DeadLetterCode.INTERNAL, f"{type(exc).__name__}: {exc}", None
            )
            await send_dead_letter(self._deps.publisher, self._deps.settings, record, error, owned)
            self._deps.metrics.dead_letters.labels(DeadLetterCode.INTERNAL).inc()
        finally:
            backlog.leave()

    async def _handle(
        self,
        record: ConsumerRecord[bytes, bytes],
        delivery: Delivery,
        owned: asyncio.Event,
        backlog: _Backlog,
    ) -> None:
        if not self._seal.admits(
            record.topic, record.key, record.value or b"", list(record.headers)
        ):
            return  # another deployment's task, or a forged one: no result anywhere
        try:
            task = PageTask.model_validate_json(record.value or b"")
        except ValidationError as exc:
            error = RejectedMessageError(
                DeadLetterCode.INVALID_REQUEST, f"not a page task: {exc}"[:2000], None
            )
            log.warning("page.unreadable", error=error.message[:200])
            await send_dead_letter(self._deps.publisher, self._deps.settings, record, error, owned)
            self._deps.metrics.dead_letters.labels(error.code).inc()
            return
        with structlog.contextvars.bound_contextvars(
            request_id=task.request_id, run_id=task.run_id, url=task.url
        ):
            if delivery.verdict is Verdict.POISON:
                message = (
                    f"page delivered {delivery.count} times; {delivery.count - 1} of the "
                    f"earlier deliveries ended with its fetcher dying while it rendered alone "
                    f"(CRAWL_MAX_DELIVERIES={self.limits.max_deliveries})"
                )
                log.error("page.poison", deliveries=delivery.count)
                await self._answer(task, owned, backlog, failed(ErrorCode.POISON, message))
            else:
                if delivery.suspect:
                    log.info("page.suspect", deliveries=delivery.count)
                charge = _Charge(self._deliveries, record, backlog, suspect=delivery.suspect)
                await self._answer(
                    task,
                    owned,
                    backlog,
                    charge=charge,
                    taken_at=record.timestamp,
                    partition=record.partition,
                )

    def queued(self, partition: int) -> int:
        """Page records of `partition` taken here and waiting for a slot (its host may be at
        its limit: they wait however many slots are free)."""
        return self._queues.get(partition, 0)

    def full(self, partition: int) -> bool:
        """A slot's worth of `partition`'s pages wait here (their hosts at their limit, or
        the slots busy): it is read no further, so it does not fill the whole backlog and
        keep the other partitions' hosts from the free slots."""
        return self.queued(partition) >= self.limits.max_page_slots

    def backlog_left(self, priority: int = 0) -> asyncio.Future[None]:
        """Done when a page leaves the backlog (its content is there) and this is the oldest
        run of those asking (lowest `priority`, then the first to ask): one page's room
        wakes one run, so the oldest runs go on and finish first, as the page slots serve
        them, and no run holds a browser context while others take turns (see
        docs/decisions/oldest-run-first.md)."""
        left: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._asked += 1
        if len(self._leaving) >= STALE_WAITERS:  # those that gave up (timed out) are dropped
            self._leaving = [entry for entry in self._leaving if not entry[2].done()]
            heapq.heapify(self._leaving)
        heapq.heappush(self._leaving, (priority, self._asked, left))
        return left

    def _left(self) -> None:
        while self._leaving:
            _, _, left = heapq.heappop(self._leaving)
            if not left.done():
                left.set_result(None)
                return

    def start_local(
        self, task: PageTask, owned: asyncio.Event, partition: int | None = None
    ) -> asyncio.Task[None]:
        """Render a task of this process's coordinator here, without the pages topic (this
        fetcher owns the task's partition, so the host's limits hold as for its records).
        No record carries it, so nothing is charged: were this process to die under the
        page, its request is delivered again, and a redelivered request's pages all go
        through the topic, where deaths are counted per page."""
        backlog = _Backlog(self._deps.scheduler, self._left)  # before any await, as a record's
        return asyncio.create_task(self._local(task, owned, backlog, partition))

    async def _local(
        self, task: PageTask, owned: asyncio.Event, backlog: _Backlog, partition: int | None
    ) -> None:
        told = _Told()
        try:
            with structlog.contextvars.bound_contextvars(url=task.url, local=True):
                await self._answer(
                    task, owned, backlog, charge=_NO_CHARGE, told=told, partition=partition
                )
        except Exception as exc:  # the local page's error boundary: its run gets an answer
            log.exception("page.crashed", error=repr(exc))
            if told.coordinator:  # its result is out and counted: no second, contradicting one
                return
            content = failed(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
            await self._answer(task, owned, backlog, content, told=told)
        finally:
            backlog.leave()

    async def _answer(
        self,
        task: PageTask,
        owned: asyncio.Event,
        backlog: _Backlog,
        content: PageContent | None = None,
        *,
        charge: PageCharge = _NO_CHARGE,
        taken_at: int | None = None,
        told: _Told | None = None,
        partition: int | None = None,
    ) -> None:
        """Render the task (unless `content` is given), then publish its answer; `partition`
        is the page partition of the task's host (where its cache entry lives)."""
        started = time.monotonic()
        # The run's context is held from here, before the policy and robots checks (the
        # run's `last` page ending while this one is still in them would otherwise hand it
        # back, and this page would open another), until the result is out, not the
        # render's end (its wipe, Chromium's CPU, would slow the result's produce on a busy
        # machine). Measured reasons: docs/decisions/context-linger.md.
        self.contexts.hold(task.run_id, last=task.last)
        ending: asyncio.Task[PageContent] | None = None
        try:
            if content is None:
                content, ending = await self._content(task, charge, partition)
            backlog.leave()  # publishing is no work for a slot: intake may go on
            result = self._stage.result(task, content, started)
            rendered = time.monotonic()
            self._deps.metrics.page_seconds.observe(rendered - started)
            await self._publish(task, result, content, owned, told)
        finally:
            if ending is None:
                self.contexts.release(task.run_id)
            else:
                self._ending.start(_release_after(ending, self.contexts, task.run_id))
        log.debug(
            "page.timing",
            taken_ms=None
            if taken_at is None
            else round(time.time() * 1000 - taken_at) - _ms(started),
            content_ms=_ms(started) - _ms(rendered),
            published_ms=_ms(rendered),
        )

    async def _content(
        self, task: PageTask, charge: PageCharge, partition: int | None
    ) -> tuple[PageContent, asyncio.Task[PageContent] | None]:
        """The page's content, or the result of what stopped it (cancel, deadline) as soon
        as it is stopped; then also the stopped render, still ending (its page closing in
        Chromium, which takes seconds on a loaded machine): it holds its slot until then."""
        stop = _PageStop()
        # A cancel read after this check reaches the page live (registered below, no
        # await between), so no round trip to the broker per page.
        cancel = self._deps.control.known_cancel(task.request_id)
        if cancel is not None:
            stop.cancel(cancel)
        left_s = _seconds_left(task)
        if left_s is not None and left_s <= 0:
            stop.halt(self._deadline_stop(task))
        if stop.stop is not None:
            return failed(stop.stop.code, stop.stop.detail), None
        timer: asyncio.TimerHandle | None = None
        if left_s is not None:
            timer = asyncio.get_running_loop().call_later(
                left_s, stop.halt, self._deadline_stop(task)
            )
        stop.task = asyncio.ensure_future(
            self._stage.content(task, charge=charge, partition=partition)
        )
        halted = asyncio.ensure_future(stop.halted.wait())
        ending: asyncio.Task[PageContent] | None = None
        try:
            with self._active.running(task.request_id, stop):
                await asyncio.wait({stop.task, halted}, return_when=asyncio.FIRST_COMPLETED)
            halt = stop.stop
            if halt is None or (stop.task.done() and not stop.task.cancelled()):
                return stop.task.result(), None  # it ended before any stop took
            ending = stop.task  # cancelled by the stop, still ending
            return failed(halt.code, halt.detail), ending
        finally:
            halted.cancel()
            if timer is not None:
                timer.cancel()
            if ending is None:
                await _cancelled(stop.task)

    def _deadline_stop(self, task: PageTask) -> Stop:
        """The same stop as the coordinator's: the request's budget, clamped."""
        budget_ms = task.options.deadline_ms or 0
        return Stop.deadline(min(budget_ms / 1000, self.limits.max_request_deadline_s))

    async def _publish(
        self,
        task: PageTask,
        result: PageResult,
        content: PageContent,
        owned: asyncio.Event,
        told: _Told | None,
    ) -> None:
        """The result, acknowledged; then the page record its coordinator counts (of a local
        page, `told`: given to the coordinator here, and its record written with others')."""
        outbox = Outbox(
            self._deps.publisher, on_resend=self._deps.metrics.publish_retries.inc, owned=owned
        )
        await outbox.put(
            self.limits.results_topic,
            task.request_id,
            dump(result),
            JSON_HEADERS,
            chunk_id=f"{result.result_id}:{result.run_id}",
        )
        await outbox.flush()
        if self._deps.cache is not None:
            await self._deps.cache.stored(task)  # the page's record comes after its entry
        code = result.error.code if result.error else None
        cancelled = code is ErrorCode.CANCELLED
        outcome = "succeeded" if result.ok else ("cancelled" if cancelled else "failed")
        self._deps.metrics.pages.labels("ok" if result.ok else str(code or "failed")).inc()
        outlinks = content.outlinks if result.ok and task.follow is not None else None
        record = FrontierRecord(
            request_id=task.request_id,
            source=task.source,
            kind="page",
            url=task.url,
            outcome=outcome,
            links=tuple(outlinks.links[:MAX_LINKS_SCANNED]) if outlinks else (),
            canonical=outlinks.canonical if outlinks else None,
            run_id=task.run_id,
            error_code=code.value if code else None,
        )
        chunk_id = f"page:{result.result_id}:{task.run_id}"
        if self._local_tail is not None:
            # The coordinator in this process counts the page now (its result is durable);
            # were this process to die before the record below is, both roles die with it,
            # and the next owners render the page again (same result_id).
            self._local_tail.offer(record)
        if told is not None:  # a local page: only a rebuild needs its record now
            told.coordinator = True
            # Not written at once even for the run's last page, so its terminal event does
            # not share the broker with this produce (docs/decisions/local-lane.md); a deep
            # crawl flushes them before its terminal event (`LocalLane.recorded`).
            self.lane_records.add(record, chunk_id)
        else:
            await outbox.put(
                self.limits.frontier_topic,
                task.request_id,
                dump(record),
                JSON_HEADERS,
                chunk_id=chunk_id,
            )
            await outbox.flush()
        log.debug("page.answered", ok=result.ok, status=result.status_code)


def _seconds_left(task: PageTask) -> float | None:
    if task.deadline_at is None:
        return None
    return (task.deadline_at - utc_now()).total_seconds()


async def _release_after(
    ending: asyncio.Task[PageContent], contexts: RunContexts, run_id: str
) -> None:
    """Hand the run's context back once a stopped render has ended (closed its page): it is
    cancelled already, and cancelling it again would cut its closing short."""
    try:
        await asyncio.wait({ending})
        if not ending.cancelled() and ending.exception() is not None:
            log.debug("page.ended_badly", error=repr(ending.exception()))
    finally:
        contexts.release(run_id)


async def _cancelled(task: asyncio.Task[PageContent]) -> None:
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def _ms(since: float) -> int:
    """Milliseconds from `since` (monotonic) to now."""
    return round((time.monotonic() - since) * 1000)
