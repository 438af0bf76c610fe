"""Page slots shared by every request of a worker, granted by an admission gate.

The gate says how many pages may render at once (memory, the concurrency limit); the slot
queue (`_slots.py`) says which waiting page gets a free slot: pages handed back at critical
memory first, then each request's share, oldest request first, then any page (so no slot
stays idle while a page could use it), never more than the host's limit per host. A few
requests run at a time and each finishes soon, yet a request taken later starts before an
older request's pages beyond its share. A page handed back (shed) is run again later, so
every page still gets exactly one result.

A page waiting for its host's politeness delay (`pacing`) is taken but is no work a slot
could start: it is not in the backlog that pauses intake, so a paced crawl never keeps the
worker from taking other requests (it still counts as pending).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from service.backpressure.governor import newest_first
from service.worker.fetcher._slots import PageTicket, SlotLimits, SlotQueue

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from service.worker.fetcher._slots import Waiting

__all__ = ["AdmissionGate", "PageScheduler", "PageTicket", "SlotLimits"]

T = TypeVar("T")


class AdmissionGate(Protocol):
    """Decides whether one more page may start now."""

    def admit(self, in_flight: int) -> bool: ...


@dataclass(slots=True, eq=False)
class _Running:
    task: asyncio.Future[object]
    shed: bool = False


class PageScheduler:
    """Runs page work when the gate admits it; sheds the newest running pages on demand."""

    def __init__(self, gate: AdmissionGate, limits: SlotLimits) -> None:
        self.gate = gate
        self._queue: SlotQueue[asyncio.Future[None]] = SlotQueue(limits)
        self._running: list[_Running] = []
        self._accepted = 0
        self._pacing = 0

    def accept(self, pages: int) -> None:
        """`pages` more pages were taken from Kafka (they count as backlog until finished)."""
        self._accepted += pages

    def finished(self, pages: int = 1) -> None:
        self._accepted -= pages

    @contextlib.contextmanager
    def pacing(self) -> Iterator[None]:
        """A taken page waits in this block for its host's politeness delay, outside the
        backlog: it is no work a free slot could start."""
        self._pacing += 1
        try:
            yield
        finally:
            self._pacing -= 1

    @property
    def pending(self) -> int:
        """Pages taken from Kafka and not finished: rendering, waiting, or pacing."""
        return max(self._accepted, self.in_flight)

    @property
    def paced(self) -> int:
        """Taken pages waiting for their host's politeness delay now."""
        return self._pacing

    @property
    def backlog(self) -> int:
        """Pages taken from Kafka and not yet rendering (waiting for a slot or for their turn),
        except those waiting for their host's politeness delay."""
        return max(self._accepted - self.in_flight - self._pacing, 0)

    @property
    def intake_backlog(self) -> int:
        """Pages a request taken now would wait behind: all taken and not rendering (also those
        still in their URL-policy and robots checks, not queued yet) but those of requests
        rendering more than their share, which it would go before. Intake pauses on this."""
        return max(self.backlog - self._queue.overtakable, 0)

    @property
    def startable(self) -> bool:
        """A waiting page could start if the gate admitted one (its host has room)."""
        return self._queue.startable

    @property
    def in_flight(self) -> int:
        return self._queue.running

    @property
    def queued(self) -> int:
        return self._queue.waiting

    async def run(self, work: Callable[[], Awaitable[T]], ticket: PageTicket) -> T:
        """Wait for a slot, run `work`; if it is shed, queue it at the front and run it again."""
        waiting = self._enqueue(ticket, handed_back=False)
        while True:
            await self._acquire(waiting)
            running = _Running(task=asyncio.ensure_future(work()))
            self._running.append(running)
            try:
                return await running.task  # type: ignore[return-value]
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if not running.shed or (current is not None and current.cancelling()):
                    raise
                waiting = self._enqueue(ticket, handed_back=True)  # before its slot is freed
            finally:
                self._running.remove(running)
                self._release(ticket)

    def shed(self, count: int) -> int:
        """Hand back the `count` newest running pages; returns how many were shed."""
        victims = newest_first([r for r in self._running if not r.shed], count)
        for running in victims:
            running.shed = True
            running.task.cancel()
        return len(victims)

    def poke(self) -> None:
        """Re-run admission (call when memory was freed or the gate changed its mind)."""
        while self.gate.admit(self.in_flight):
            granted = self._queue.pop()
            if granted is None:
                return
            if granted.item.cancelled():  # its caller was cancelled and has not resumed yet
                self._queue.done(granted.ticket)
                continue
            granted.item.set_result(None)

    def _enqueue(self, ticket: PageTicket, *, handed_back: bool) -> Waiting[asyncio.Future[None]]:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        return self._queue.push(ticket, waiter, handed_back=handed_back)

    async def _acquire(self, waiting: Waiting[asyncio.Future[None]]) -> None:
        self.poke()
        try:
            await waiting.item
        except asyncio.CancelledError:
            if waiting.item.cancelled():
                self._queue.remove(waiting)
            else:
                self._release(waiting.ticket)  # granted, then cancelled before it started
            raise

    def _release(self, ticket: PageTicket) -> None:
        self._queue.done(ticket)
        self.poke()
