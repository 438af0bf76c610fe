"""One run of one request at its coordinator: every page gets exactly one result, then one
terminal event.

The coordinator plans the run's pages (`plans.py`: a list, or a deep crawl's fold),
dispatches them to the pages topic keyed by host, and learns from the frontier topic that
a fetcher finished one (its `page` record, written after its result was acknowledged).
It sends every `ProgressEvent` of the run, so `seq` has no gaps whichever fetchers render.

Flow control: at most `CRAWL_DISPATCH_WINDOW` pages of one run and one host are
dispatched and unfinished; the rest wait here, in the plan. A run that takes a request over
(a redelivery, or a deep crawl) first reads the request's frontier records: pages with a
`page` record are done (counted, their links folded), pages in a `dispatched` record are
waited for (their tasks are on the pages topic and a fetcher will answer them), and the
rest are dispatched.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import structlog

from service.background import Background
from service.changes.reach import Unreached
from service.content.page import failed
from service.contracts import (
    ErrorCode,
    EventType,
    FrontierRecord,
    PageResult,
    PageTask,
    result_id_for,
    utc_now,
)
from service.control.stop import Stop
from service.frontier.plan import Expansion, SitemapPages
from service.frontier.sitemap import sitemap_urls
from service.logs import get_logger
from service.messaging.failures import root_cause
from service.worker.coordinator.ledger import RunLedger
from service.worker.coordinator.outputs import Destinations, RunOutputs
from service.worker.coordinator.page_keys import page_key
from service.worker.coordinator.plans import plan_for

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from service.contracts import CrawlRequest, RecordSource
    from service.control import Cancel
    from service.frontier.plan import Admitted
    from service.worker.coordinator.deps import CoordinatorDeps

log = get_logger(__name__)


class Run:
    """The coordinator's side of one request: plan, dispatch, count, events."""

    def __init__(
        self,
        deps: CoordinatorDeps,
        request: CrawlRequest,
        *,
        source: RecordSource,
        priority: int = 0,
        owned: asyncio.Event | None = None,
        since_ms: int = 0,
        earlier: bool = False,
        relieve: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._deps = deps
        self._request = request
        self._priority = priority
        self.run_id = uuid.uuid4().hex
        self._plan = plan_for(request)
        self._outputs = RunOutputs(
            deps.publisher,
            Destinations.from_settings(deps.settings),
            request_id=request.request_id,
            run_id=self.run_id,
            total=len(self._plan.admitted),
            request_metadata=request.metadata,
            source=source,
            on_resend=deps.metrics.publish_retries.inc,
            owned=owned,
        )
        self._outputs.discovered = self._plan.discovered
        self._since_ms = since_ms
        self._earlier = earlier
        self._relieve = relieve
        self._stop: Stop | None = None
        self._stopped = asyncio.Event()
        self._arrived: asyncio.Queue[FrontierRecord] = asyncio.Queue()
        self._ledger = RunLedger(self._key)
        """Each admitted page waiting, dispatched or done."""
        self._deadline_at: datetime | None = None
        self._started = time.monotonic()
        self._relieving: asyncio.Future[None] | None = None
        self._owned = owned or _always_owned()
        self._lane_full = False
        """Pages of keys this process's fetcher owns wait for room in its backlog."""
        self._local = Background()
        """Pages of this run rendering in this process's fetcher (`CoordinatorDeps.local`),
        cancelled if the run is (its partition moved: the next owner renders them)."""
        self._went_local = False
        """A page of this run took the local lane (its record is written with others')."""
        self._reported = 0
        """`removed` results of pages a previous tracked crawl reached (`_report_unreached`)."""
        self._marks: dict[str, float] = {}
        """Wall-clock ms of the run's steps, logged at debug level (`run.timing`)."""

    def cancel(self, cancel: Cancel) -> None:
        """Stop: dispatch nothing more; fetchers stop this run's pages as the cancel
        reaches them; pages never dispatched get `cancelled` results."""
        self._halt(Stop.cancelled(cancel))

    def _halt(self, stop: Stop) -> None:
        if self._stop is None:
            self._stop = stop
            self._stopped.set()
            log.info("run.stopping", reason=stop.code.value, detail=stop.detail)

    def _budget_s(self) -> float | None:
        deadline_ms = self._request.options.deadline_ms
        if deadline_ms is None:
            return None
        return min(deadline_ms / 1000, self._deps.settings.max_request_deadline.total_seconds())

    async def execute(self) -> None:
        """Run to the terminal event and wait until all of it is acknowledged."""
        with structlog.contextvars.bound_contextvars(run_id=self.run_id):
            try:
                await self._execute()
            except asyncio.CancelledError:
                for page in self._local:
                    page.cancel()
                raise

    def _mark(self, step: str) -> None:
        self._marks.setdefault(step, time.time() * 1000)

    async def _execute(self) -> None:
        self._mark("started")
        expires_at = self._request.expires_at
        if expires_at is not None and expires_at <= utc_now():
            await self._finish(EventType.EXPIRED, f"expired at {expires_at.isoformat()}")
            return
        tail = self._deps.tail
        request_id = self._request.request_id
        # Parsed and planned: from here the run only waits for pages, and its worker's
        # death is not charged to the record. The commit runs beside the next steps
        # (`accepted`, the first dispatch): a few ms, long before a page
        # dispatched now could have begun rendering.
        if self._relieve is not None:
            self._relieving = asyncio.ensure_future(self._relieve())  # kept until done
        position = await tail.subscribe(request_id, self._deliver)
        deadline: asyncio.TimerHandle | None = None
        try:
            # The cancels read so far; one read later reaches this run live (it is in the
            # worker's active runs since before `execute`), and each fetcher checks its own
            # reader the same way, so no wait for the control topic's end (a round trip,
            # 4-6 ms of a 1-URL request): a page of a request cancelled just before it
            # may start, and is stopped as soon as the cancel is read.
            cancel = self._deps.control.known_cancel(request_id)
            if cancel is not None:
                self.cancel(cancel)
            budget_s = self._budget_s()
            if budget_s is not None:
                self._deadline_at = utc_now() + timedelta(seconds=budget_s)
                loop = asyncio.get_running_loop()
                deadline = loop.call_later(budget_s, self._halt, Stop.deadline(budget_s))
            await self._outputs.event(EventType.ACCEPTED)
            self._mark("accepted_sent")
            await self._crawl_or_fail(position)
        finally:
            if deadline is not None:
                deadline.cancel()
            tail.unsubscribe(request_id, self._deliver)
            self._deps.metrics.runs_waiting.dec(self._ledger.dispatched)

    def _deliver(self, record: FrontierRecord) -> None:
        if record.source == self._outputs.source:
            self._arrived.put_nowait(record)

    async def _crawl_or_fail(self, position: int) -> None:
        try:
            await self._crawl(position)
        except Exception as exc:  # loop boundary: the request fails, the worker goes on
            cause = root_cause(exc)
            log.exception("request.failed", error=repr(cause), exc_info=cause)
            message = f"{type(cause).__name__}: {cause}"
            await self._fail_remaining(ErrorCode.INTERNAL, message, dispatched=True)
            await self._finish(EventType.FAILED, message)
            return
        stop = self._stop
        if stop is None:
            unreached = self._unreached()
            if unreached is not None:
                await self._report_unreached(unreached)
                await unreached.keep({page.url for page in self._plan.admitted})
            await self._finish(EventType.COMPLETED, self._plan.completion())
            return
        await self._finish(stop.terminal, stop.detail)

    def _unreached(self) -> Unreached | None:
        """The report of pages a previous crawl reached, for a tracked deep crawl."""
        tracking = self._request.options.change_tracking
        if tracking is None or not self._plan.deep:
            return None
        deps = self._deps
        return Unreached(
            deps.settings,
            deps.publisher,
            deps.sitemaps,
            request=self._request,
            tracking=tracking,
            run_id=self.run_id,
            source=self._outputs.source,
        )

    async def _report_unreached(self, unreached: Unreached) -> None:
        """A `removed` result for each page the previous crawl reached and this one did not
        (they count in the run's total)."""
        reported = await unreached.results({page.url for page in self._plan.admitted})
        self._reported = len(reported)
        self._outputs.total = len(self._plan.admitted) + self._reported
        for result in reported:
            await self._outputs.result(result)

    async def _crawl(self, position: int) -> None:
        sitemap_logged = await self._replay(position)
        ledger = self._ledger
        self._ledger.enqueue(page for page in self._plan.admitted if not ledger.known(page.url))
        sitemap: asyncio.Task[SitemapPages] | None = None
        if self._plan.wants_sitemap:
            sitemap = asyncio.create_task(self._sitemap(sitemap_logged))
        stopped = asyncio.create_task(self._stopped.wait())
        try:
            while not self._stopped.is_set():
                await self._dispatch()
                if not self._ledger.pending and sitemap is None:
                    break
                await self._arrivals(stopped, sitemap)
                if sitemap is not None and sitemap.done():
                    self._admit(self._plan.sitemap(sitemap.result()))
                    sitemap = None
        finally:
            stopped.cancel()
            if sitemap is not None:
                sitemap.cancel()
        if self._stop is not None:
            await self._stopping(self._stop)

    async def _arrivals(
        self, stopped: asyncio.Task[bool], sitemap: asyncio.Task[SitemapPages] | None
    ) -> None:
        """Wait for a page's outcome, the stop, the sitemap or room for more pages; take
        the outcomes that arrived."""
        arrival = asyncio.create_task(self._arrived.get())
        room = self._room_opened()
        wait = {arrival, stopped, *room, *([sitemap] if sitemap else [])}
        try:
            await asyncio.wait(wait, return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when the run is cancelled: no waiter outlives it
            for waiter in room:
                waiter.cancel()
            if not arrival.done():
                arrival.cancel()
        if arrival.done() and not arrival.cancelled():
            await self._take(arrival.result())
        while not self._arrived.empty():
            await self._take(self._arrived.get_nowait())

    def _room_opened(self) -> list[asyncio.Task[None]]:
        """While pages wait for room in this process's fetcher: a wait for it."""
        lane = self._deps.local
        if not self._lane_full or lane is None:
            return []
        return [asyncio.create_task(lane.room_opened(self._priority))]

    async def _stopping(self, stop: Stop) -> None:
        """Pages never dispatched get the stop's results here; dispatched ones are stopped
        by their fetchers (cancel from the control topic, `deadline_at` on the task), whose
        answers are waited for, so every page still has one result."""
        await self._fail_remaining(stop.code, stop.detail, dispatched=False)
        while self._ledger.dispatched:
            await self._take(await self._arrived.get())

    async def _replay(self, position: int) -> SitemapPages | None:
        """What earlier runs of this request left in the frontier log (only read when the
        record was delivered before, or for a deep crawl, whose log a run rebuilds from)."""
        if not (self._earlier or self._plan.deep):
            return None
        records = await self._deps.frontier_log(
            self._deps.settings,
            self._request.request_id,
            self._outputs.source,
            since_ms=self._since_ms,
            until=position,
        )
        sitemap, finished, dispatched = _logged(records)
        finished_urls = set(finished)
        if sitemap is not None:
            self._plan.sitemap(sitemap)
        await self._resume(finished, dispatched)
        self._deps.metrics.runs_waiting.inc(self._ledger.dispatched)
        self._outputs.total = len(self._plan.admitted)
        self._outputs.discovered = self._plan.discovered
        if records:
            log.info(
                "crawl.resumed",
                pages=len(finished_urls),
                dispatched=self._ledger.dispatched,
                sitemap=sitemap is not None,
            )
        return sitemap

    async def _resume(self, finished: dict[str, FrontierRecord], dispatched: set[str]) -> None:
        """Fold finished pages in admission order (admitting may reveal more finished ones),
        each with its page event in this run (an earlier run may have died before sending
        it: every run's events name every page it counts); pages dispatched and unanswered
        are waited for."""
        index = 0
        while index < len(self._plan.admitted):
            page = self._plan.admitted[index]
            index += 1
            record = finished.pop(page.url, None)
            if record is not None:
                self._ledger.done_before(page.url)
                self._plan.finished(record)
                self._outputs.total = len(self._plan.admitted)
                self._outputs.discovered = self._plan.discovered
                await self._outputs.page_done(
                    page.url, record.outcome or "failed", record.error_code
                )
            elif page.url in dispatched:
                self._ledger.dispatched_before(page.url)

    def _key(self, url: str) -> str:
        return page_key(url, self._request.options, self._deps.settings)

    async def _dispatch(self) -> None:
        """Dispatch the waiting pages the window allows, in order; once the broker has
        them, log which (so a next coordinator waits for them instead of re-sending)."""
        # a new host gets its partition
        await self._deps.placement.place(self._ledger.waiting_keys())
        local, batch = self._next_batch()
        if not local and not batch:
            return
        if self._plan.final:
            _mark_last(local, self._ledger)
            _mark_last(batch, self._ledger)
        self._mark("dispatched")
        self._deps.metrics.runs_waiting.inc(len(local) + len(batch))
        lane = self._deps.local
        if lane is not None:
            for task, _ in local:
                page = lane.start(task, self._owned)
                self._local.keep(page)
                self._went_local = True
        if not batch:
            return
        async with self._deps.dispatching:
            for task, key in batch:
                await self._outputs.dispatch(task, key, self._deps.placement.partition(key))
        sent = [task.url for task, _ in batch]
        await self._outputs.acknowledged()
        await self._outputs.frontier(self._record("dispatched", links=tuple(sent)))

    def _next_batch(self) -> tuple[list[tuple[PageTask, str]], list[tuple[PageTask, str]]]:
        """The waiting pages the window allows now, each with its page key, in order: those
        for this process's fetcher (the local lane: as many as its backlog has room for;
        the others of its keys wait here for room, `_lane_full`) and those for the topic.

        A redelivered request's pages all take the topic: its worker may have died under a
        lane page, and deaths are counted per page record there. A lane page is in no
        `dispatched` record: were this process to die, the next run dispatches it again.
        """
        lane = None if self._earlier else self._deps.local
        taken = self._ledger.next_batch(
            self._deps.settings.dispatch_window,
            owns=None if lane is None else lane.owns,
            room=0 if lane is None else lane.room(),
        )
        self._lane_full = taken.lane_full
        local = [(self._task(page), key) for page, key in taken.local]
        return local, [(self._task(page), key) for page, key in taken.topic]

    def _task(self, page: Admitted) -> PageTask:
        request = self._request
        return PageTask(
            request_id=request.request_id,
            run_id=self.run_id,
            url=page.url,
            options=request.options,
            source=self._outputs.source,
            request_metadata=request.metadata,
            depth=page.depth,
            parent_url=page.parent_url,
            follow=self._plan.follow(page),
            delay_ms=self._plan.delay_ms,
            deadline_at=self._deadline_at,
            priority=self._priority,
        )

    async def _take(self, record: FrontierRecord) -> None:
        """A page record arrived: count the page once, send its event, fold its links (not
        once the run is stopping: every page it counts must get a result)."""
        url = record.url
        if record.kind != "page" or url is None:
            return
        counted = self._ledger.answered(url)
        if counted is None:
            return  # counted before, or not a page of this run's plan
        if counted:
            self._deps.metrics.runs_waiting.dec()
        self._mark("first_outcome")
        self._outputs.discovered = self._plan.discovered
        await self._outputs.page_done(url, record.outcome or "failed", record.error_code)
        if self._stop is None:  # a stopped run admits nothing more: what it counts, it answers
            self._admit(await self._fold(record))

    async def _fold(self, record: FrontierRecord) -> list[Admitted]:
        plan = self._plan
        if plan.heavy(record):  # normalising and matching cost ~0.1 ms a link
            expansion: Expansion = await asyncio.to_thread(plan.expansion, record)
        else:
            expansion = plan.expansion(record)
        return plan.fold(record, expansion)

    def _admit(self, pages: list[Admitted]) -> None:
        self._ledger.enqueue(pages)
        self._outputs.total = len(self._plan.admitted)
        self._outputs.discovered = self._plan.discovered

    async def _sitemap(self, logged: SitemapPages | None) -> SitemapPages:
        """The sitemap's pages the budget can admit: as an earlier run logged them, or read
        now, cut at the budget and logged."""
        if logged is not None:
            return logged
        plan = self._plan
        urls = await sitemap_urls(self._deps.sitemaps, self._request.urls)
        pages = await asyncio.to_thread(plan.sitemap_pages, urls)
        if pages.left_out:
            log.info(
                "sitemap.cut", listed=len(urls), kept=len(pages.links), left_out=pages.left_out
            )
        await self._outputs.frontier(
            self._record("sitemap", links=pages.links, left_out=pages.left_out, beyond=pages.beyond)
        )
        return pages

    def _record(
        self,
        kind: str,
        *,
        links: tuple[str, ...] = (),
        left_out: int = 0,
        beyond: tuple[str, ...] = (),
    ) -> FrontierRecord:
        return FrontierRecord.model_validate(
            {
                "request_id": self._request.request_id,
                "source": self._outputs.source,
                "kind": kind,
                "links": links,
                "left_out": left_out,
                "beyond": beyond,
                "run_id": self.run_id,
            }
        )

    async def _finish(self, kind: EventType, detail: str | None) -> None:
        lane = self._deps.local
        if self._went_local and lane is not None and self._plan.deep:
            # A deep crawl's frontier records before its terminal event: `map` reads them
            # once it saw that event. A list request's are only for a rebuild: no wait.
            await lane.recorded()
        self._outputs.total = len(self._plan.admitted) + self._reported
        await self._outputs.event(kind, detail=detail)
        await self._outputs.acknowledged()
        self._mark("acknowledged")
        since = self._since_ms or self._marks["started"]
        log.debug("run.timing", **{f"{k}_ms": round(v - since) for k, v in self._marks.items()})
        self._deps.metrics.requests.labels(kind.value).inc()
        log.info(
            "request.finished",
            outcome=kind.value,
            total=self._outputs.total,
            succeeded=self._outputs.succeeded,
            failed=self._outputs.failed,
            cancelled=self._outputs.cancelled,
            elapsed_ms=round((time.monotonic() - self._started) * 1000),
        )

    async def fail_all(self, code: ErrorCode, message: str) -> None:
        """Crawl nothing: every page gets a failed result with `code`, then `failed`."""
        with structlog.contextvars.bound_contextvars(run_id=self.run_id):
            await self._outputs.event(EventType.ACCEPTED)
            self._ledger.enqueue(self._plan.admitted)
            await self._fail_remaining(code, message, dispatched=False)
            await self._finish(EventType.FAILED, f"{code.value}: {message}")

    async def _fail_remaining(self, code: ErrorCode, message: str, *, dispatched: bool) -> None:
        """Publish a failed result for each page never dispatched (and, with `dispatched`,
        for those a fetcher has not answered: the run is given up)."""
        if dispatched:
            self._deps.metrics.runs_waiting.dec(self._ledger.dispatched)
        unanswered = self._ledger.give_up(self._plan.admitted, dispatched=dispatched)
        for page in unanswered:
            await self._outputs.result(self._failed_result(page, code, message))
        self._deps.metrics.pages.labels(code.value).inc(len(unanswered))

    def _failed_result(self, page: Admitted, code: ErrorCode, message: str) -> PageResult:
        request = self._request
        return PageResult(
            request_id=request.request_id,
            result_id=result_id_for(request.request_id, page.url),
            run_id=self.run_id,
            url=page.url,
            **failed(code, message).result_fields(),
            elapsed_ms=0,
            fetched_at=utc_now(),
            worker=self._deps.settings.worker_name,
            request_metadata=request.metadata,
            source=self._outputs.source,
            depth=page.depth,
            parent_url=page.parent_url,
        )


def _logged(
    records: list[FrontierRecord],
) -> tuple[SitemapPages | None, dict[str, FrontierRecord], set[str]]:
    """The sitemap, finished pages (first record of each) and dispatched pages of a log."""
    sitemap: SitemapPages | None = None
    finished: dict[str, FrontierRecord] = {}
    dispatched: set[str] = set()
    for record in records:
        if record.kind == "sitemap":
            sitemap = SitemapPages(record.links, record.left_out)
        elif record.kind == "dispatched":
            dispatched.update(record.links)
        elif record.url is not None:
            finished.setdefault(record.url, record)
    return sitemap, finished, dispatched


def _mark_last(tasks: list[tuple[PageTask, str]], ledger: RunLedger) -> None:
    """Flag each key's last task when nothing of its key waits after it (and the plan will
    admit no more): the fetcher holding that key hands the run's context back as soon as
    that page ends, instead of keeping it `CONTEXT_LINGER_S` for pages that will not come."""
    last: dict[str, int] = {
        key: n for n, (_, key) in enumerate(tasks) if not ledger.has_waiting(key)
    }
    for n in last.values():
        task, key = tasks[n]
        tasks[n] = (task.model_copy(update={"last": True}), key)


def _always_owned() -> asyncio.Event:
    owned = asyncio.Event()
    owned.set()
    return owned
