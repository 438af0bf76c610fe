"""The local lane: the coordinator in this process hands a page whose partition this
process's fetcher owns straight to it (role `all`), and the frontier records of those pages
are written several at a time (docs/decisions/local-lane.md)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final, Protocol

from service.background import Background
from service.contracts import dump
from service.logs import get_logger
from service.messaging.outbox import Outbox
from service.messaging.publisher import JSON_HEADERS

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.contracts import FrontierRecord, PageTask
    from service.messaging.publisher import Publisher
    from service.worker.fetcher.deps import FetcherLimits
    from service.worker.fetcher.scheduler import PageScheduler

log = get_logger(__name__)

ROOM_RECHECK_S: Final = 0.2
"""How long a run waiting for room in this process's fetcher waits before looking again
when no page left the backlog (the memory gate may have let more in meanwhile)."""

LANE_RECORDS_LINGER_S: Final = 0.5
"""How long a local page's frontier record may wait for others to be written with."""

LANE_RECORDS_BATCH: Final = 32
"""Local pages' frontier records written at once, whatever the linger."""

LANE_RECORDS_CLOSE_S: Final = 10.0
"""How long a stopping worker waits for the local pages' records still being written."""


class LaneFetcher(Protocol):
    """What the lane uses of this process's fetcher (`records.Fetcher`)."""

    scheduler: PageScheduler
    limits: FetcherLimits
    lane_records: LaneRecords

    def backlog_left(self, priority: int = ...) -> asyncio.Future[None]: ...
    def start_local(
        self, task: PageTask, owned: asyncio.Event, partition: int | None
    ) -> asyncio.Task[None]: ...


class LaneRecords:
    """The frontier records of local pages, written several at a time.

    The coordinator in this process was given each local page's outcome at once (its
    result was acknowledged first); the record is only for a next coordinator rebuilding
    the run, so it waits up to `LANE_RECORDS_LINGER_S` for others: one produce, and one
    fetch of the coordinator's tail, for several pages instead of one each (the measured
    reason is in docs/decisions/local-lane.md). Were the process to die before they are
    written, the next owner renders those pages again (their results keep their
    `result_id`). They do not wait for the request partition's ownership: a late record
    only says what is true, that the page's result is published.
    """

    def __init__(
        self,
        publisher: Publisher,
        topic: str,
        *,
        on_resend: Callable[[int], None] | None = None,
        linger_s: float = LANE_RECORDS_LINGER_S,
    ) -> None:
        self._publisher = publisher
        self._topic = topic
        self._on_resend = on_resend
        self._linger_s = linger_s
        self._pending: list[tuple[FrontierRecord, str]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._writing = Background()
        self._unacknowledged = 0

    @property
    def pending(self) -> int:
        """Records not yet acknowledged (waiting, or being written)."""
        return len(self._pending) + self._unacknowledged

    def add(self, record: FrontierRecord, chunk_id: str) -> None:
        self._pending.append((record, chunk_id))
        if len(self._pending) >= LANE_RECORDS_BATCH:
            self.write_now()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._linger_s, self.write_now)

    def write_now(self) -> None:
        """Write what waits, without waiting for the linger."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        self._unacknowledged += len(batch)
        self._writing.start(self._write(batch))

    async def flush(self) -> None:
        """Write what waits and wait for it (bounded: a stopping process stops either way)."""
        self.write_now()
        late = await self._writing.wait(LANE_RECORDS_CLOSE_S)
        if late:
            log.warning("lane.records_unwritten", batches=len(late))
            for task in late:
                task.cancel()

    async def _write(self, batch: list[tuple[FrontierRecord, str]]) -> None:
        outbox = Outbox(self._publisher, on_resend=self._on_resend)
        try:
            for record, chunk_id in batch:  # all handed over before any ack: one produce
                await outbox.put(
                    self._topic, record.request_id, dump(record), JSON_HEADERS, chunk_id=chunk_id
                )
            await outbox.flush()
        except Exception as exc:  # the batch's boundary: those pages are rendered again if
            # their run is rebuilt, nothing else depends on these records
            log.exception("lane.records_failed", records=len(batch), error=repr(exc))
        finally:
            self._unacknowledged -= len(batch)


class LocalLane:
    """The coordinator's way to this process's fetcher (role `all`): tasks whose page key's
    partition its pages consumer owns now (and has no records of waiting on the topic, which
    go first) are handed to it, as many as its page backlog has room for
    (`CRAWL_MAX_QUEUED_PAGES`, none while the memory gate pauses intake); the run keeps the
    rest until room opens, since they would reach this same fetcher through the topic."""

    def __init__(
        self,
        fetcher: LaneFetcher,
        owns: Callable[[str], bool],
        paused: Callable[[], bool] = lambda: False,
        partition_of: Callable[[PageTask], int | None] = lambda _task: None,
    ) -> None:
        self._fetcher = fetcher
        self._owns = owns
        self._partition_of = partition_of
        """The page partition a task's host is placed on (where its cache entry lives)."""
        self._paused = paused
        """The memory gate's last word on intake (`MemoryGate.paused`)."""
        self._running = Background()

    def owns(self, key: str) -> bool:
        return self._owns(key)

    def room(self) -> int:
        """Pages the fetcher's backlog takes now."""
        if self._paused():
            return 0
        backlog = self._fetcher.scheduler.intake_backlog
        return max(self._fetcher.limits.max_queued_pages - backlog, 0)

    async def room_opened(self, priority: int) -> None:
        """Return when a page left the backlog and this run is the oldest waiting (lowest
        `priority`: its request record's timestamp), or after `ROOM_RECHECK_S` (memory may
        allow more meanwhile)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._fetcher.backlog_left(priority), ROOM_RECHECK_S)

    def start(self, task: PageTask, owned: asyncio.Event) -> asyncio.Task[None]:
        page = self._fetcher.start_local(task, owned, self._partition_of(task))
        self._running.keep(page)  # kept here: a run may end before its page's last record
        return page

    async def recorded(self) -> None:
        """Return once the frontier records of the pages answered so far are written (a deep
        crawl ends with them: a reader of the frontier topic that saw its terminal event,
        as `map` does, finds them)."""
        await self._fetcher.lane_records.flush()

    async def close(self) -> None:
        """Cancel what still runs (the worker stops; the requests are delivered again)."""
        await self._running.cancel()
