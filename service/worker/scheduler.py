"""Page slots shared by every request of a worker, granted by an admission gate.

Waiting pages are served oldest request first (then in arrival order), so a few requests run
at a time and each finishes soon, instead of every request holding a browser context open
while it waits. A page handed back at critical memory (shed) goes before all others and is
run again later, so every page still gets exactly one result.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

T = TypeVar("T")


class AdmissionGate(Protocol):
    """Decides whether one more page may start now."""

    def admit(self, in_flight: int) -> bool: ...


@dataclass(frozen=True, slots=True)
class FixedGate:
    """Admits up to `limit` pages at once, whatever the memory."""

    limit: int

    def admit(self, in_flight: int) -> bool:
        return in_flight < self.limit


@dataclass(slots=True, eq=False)
class _Running:
    task: asyncio.Future[object]
    shed: bool = False


class PageScheduler:
    """Runs page work when the gate admits it; sheds the newest running pages on demand."""

    def __init__(self, gate: AdmissionGate) -> None:
        self.gate = gate
        self._waiting: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()
        self._running: list[_Running] = []
        self._granted = 0
        self._accepted = 0

    def accept(self, pages: int) -> None:
        """`pages` more pages were taken from Kafka (they count as backlog until finished)."""
        self._accepted += pages

    def finished(self, pages: int = 1) -> None:
        self._accepted -= pages

    @property
    def backlog(self) -> int:
        """Pages taken from Kafka and not yet rendering (waiting for a slot or for their turn)."""
        return max(self._accepted - self._granted, 0)

    @property
    def in_flight(self) -> int:
        return self._granted

    @property
    def queued(self) -> int:
        return sum(1 for *_, waiter in self._waiting if not waiter.done())

    async def run(self, work: Callable[[], Awaitable[T]], *, priority: int = 0) -> T:
        """Wait for a slot, run `work`; if it is shed, queue it at the front and run it again.

        Lower `priority` runs first (the worker passes the request's arrival number).
        """
        waiter = self._enqueue(priority, front=False)
        while True:
            await self._acquire(waiter)
            running = _Running(task=asyncio.ensure_future(work()))
            self._running.append(running)
            try:
                return await running.task  # type: ignore[return-value]
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not running.shed or (current is not None and current.cancelling()):
                    raise
                waiter = self._enqueue(priority, front=True)  # queued before its slot is freed
            finally:
                self._running.remove(running)
                self._release()

    def shed(self, count: int) -> int:
        """Hand back the `count` newest running pages; returns how many were shed."""
        victims = [r for r in reversed(self._running) if not r.shed][:count]
        for running in victims:
            running.shed = True
            running.task.cancel()
        return len(victims)

    def poke(self) -> None:
        """Re-run admission (call when memory was freed or the gate changed its mind)."""
        while self._waiting:
            waiter = self._waiting[0][-1]
            if waiter.done():
                heapq.heappop(self._waiting)
                continue
            if not self.gate.admit(self._granted):
                return
            heapq.heappop(self._waiting)
            self._granted += 1
            waiter.set_result(None)

    def _enqueue(self, priority: int, *, front: bool) -> asyncio.Future[None]:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (0 if front else 1, priority, next(self._arrivals), waiter)
        heapq.heappush(self._waiting, entry)
        return waiter

    async def _acquire(self, waiter: asyncio.Future[None]) -> None:
        self.poke()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()
            raise

    def _release(self) -> None:
        self._granted -= 1
        self.poke()
