"""Lanes: one per receiver (`scheme://host:port`), each with a bounded queue and a bounded
number of deliveries at once, so one slow receiver sets no one else's pace. A job's events
always take the same slot of its lane, one after the other, in the order they were read."""

from __future__ import annotations

import asyncio
import contextlib
import math
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Work:
    """One event to handle: `run` it, then say it is `done` (never when cancelled: an event
    a stopped dispatcher did not deliver stays uncommitted, and is read again)."""

    job: str
    run: Callable[[], Awaitable[None]]
    done: Callable[[], None]


class Lane:
    """One receiver's slots: `concurrency` queues, each served by one task."""

    def __init__(
        self, origin: str, *, concurrency: int, depth: int, failed: Callable[[], None]
    ) -> None:
        self.origin = origin
        size = max(1, math.ceil(depth / concurrency))
        self._queues: list[asyncio.Queue[Work]] = [
            asyncio.Queue(maxsize=size) for _ in range(concurrency)
        ]
        self._failed = failed
        self._busy = 0
        self._tasks = [asyncio.create_task(self._serve(queue)) for queue in self._queues]

    @property
    def idle(self) -> bool:
        return self._busy == 0 and all(queue.empty() for queue in self._queues)

    def offer(self, work: Work) -> bool:
        """Queue `work` in its job's slot if it has room now."""
        try:
            self._slot(work).put_nowait(work)
        except asyncio.QueueFull:
            return False
        return True

    async def put(self, work: Work, *, timeout_s: float) -> bool:
        """Queue `work` in its job's slot; False when the slot stayed full for `timeout_s`."""
        try:
            await asyncio.wait_for(self._slot(work).put(work), timeout_s)
        except TimeoutError:
            return False
        return True

    def _slot(self, work: Work) -> asyncio.Queue[Work]:
        return self._queues[zlib.crc32(work.job.encode()) % len(self._queues)]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _serve(self, queue: asyncio.Queue[Work]) -> None:
        while True:
            work = await queue.get()
            self._busy += 1
            try:
                await work.run()
            except Exception:  # the event's error boundary: traceback, count, next event
                log.exception("webhook.failed", receiver=self.origin, job=work.job)
                self._failed()
            finally:
                self._busy -= 1
            work.done()


class Lanes:
    """The lanes of every receiver seen; an idle one is closed by `reap`."""

    def __init__(self, *, concurrency: int, depth: int, failed: Callable[[], None]) -> None:
        self._concurrency = concurrency
        self._depth = depth
        self._failed = failed
        self._lanes: dict[str, Lane] = {}

    def __len__(self) -> int:
        return len(self._lanes)

    def of(self, origin: str) -> Lane:
        lane = self._lanes.get(origin)
        if lane is None:
            lane = Lane(
                origin, concurrency=self._concurrency, depth=self._depth, failed=self._failed
            )
            self._lanes[origin] = lane
        return lane

    async def reap(self) -> None:
        for origin, lane in list(self._lanes.items()):
            if lane.idle:
                del self._lanes[origin]
                await lane.close()

    async def close(self) -> None:
        lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            await lane.close()
