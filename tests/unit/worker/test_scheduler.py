"""Page slots: the gate bounds concurrency, waiters run in order, shed pages run again; a big
request uses idle slots without keeping a later request from the next free one."""

from __future__ import annotations

import asyncio

import pytest
from inmemory import FixedGate
from waiting import until

from service.worker.fetcher.scheduler import PageScheduler, PageTicket, SlotLimits

ROOMY = SlotLimits(per_request=100, per_host=100)
"""Shares and host limits that never bind: the gate alone decides."""


def _ticket(request: str = "r", *, priority: int = 0, host: str = "h") -> PageTicket:
    return PageTicket(run=request, priority=priority, host=host)


async def test_gate_bounds_concurrency_and_everything_runs():
    """No more than the gate's limit run at once, and every piece of work finishes."""
    scheduler = PageScheduler(FixedGate(2), ROOMY)
    running = 0
    peak = 0
    release = asyncio.Event()

    async def work(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1
        return n

    tasks = [asyncio.create_task(scheduler.run(lambda n=n: work(n), _ticket())) for n in range(5)]
    await until(lambda: running >= 2 and scheduler.queued >= 3)
    release.set()
    assert await asyncio.gather(*tasks) == list(range(5))
    assert peak == 2
    assert scheduler.in_flight == 0


async def test_shed_work_goes_back_to_the_front_and_runs_again():
    """The newest running page is handed back, queued first, and still gives its result."""
    scheduler = PageScheduler(FixedGate(2), ROOMY)
    attempts: dict[str, int] = {}
    gates = {name: asyncio.Event() for name in "abc"}

    async def work(name: str) -> str:
        attempts[name] = attempts.get(name, 0) + 1
        await gates[name].wait()
        return name

    tasks = {n: asyncio.create_task(scheduler.run(lambda n=n: work(n), _ticket())) for n in "abc"}
    await until(lambda: attempts.keys() == {"a", "b"})
    assert scheduler.shed(1) == 1
    await until(lambda: attempts.get("b") == 2)
    assert "c" not in attempts
    for gate in gates.values():
        gate.set()
    assert [await tasks[n] for n in "abc"] == ["a", "b", "c"]
    assert attempts == {"a": 1, "b": 2, "c": 1}


async def test_cancelled_caller_frees_its_slot():
    """A caller cancelled while waiting or running leaves no slot taken."""
    scheduler = PageScheduler(FixedGate(1), ROOMY)
    blocker = asyncio.Event()
    first = asyncio.create_task(scheduler.run(blocker.wait, _ticket()))
    second = asyncio.create_task(scheduler.run(blocker.wait, _ticket()))
    await until(lambda: scheduler.queued >= 1)
    second.cancel()
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    assert (scheduler.in_flight, scheduler.queued) == (0, 0)


class _Pages:
    """Page work that runs until released; records which pages started, in order."""

    def __init__(self, scheduler: PageScheduler) -> None:
        self.scheduler = scheduler
        self.started: list[str] = []
        self.release: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[str]] = {}

    def add(self, name: str, ticket: PageTicket) -> None:
        self.release[name] = asyncio.Event()

        async def work() -> str:
            self.started.append(name)
            await self.release[name].wait()
            return name

        self.tasks[name] = asyncio.create_task(self.scheduler.run(work, ticket))

    async def settle(self) -> None:
        for _ in range(10):
            await asyncio.sleep(0)

    async def close(self) -> None:
        for event in self.release.values():
            event.set()
        await asyncio.gather(*self.tasks.values())


async def test_a_big_request_fills_idle_slots_and_a_later_request_gets_the_next_free_one():
    """8 slots, share 2: a 100-page request of hanging pages runs 8 at once; a 1-page request
    taken after it starts in the first slot that frees, before the big request's next page,
    and the big request's pages beyond its share stay out of the intake backlog."""
    scheduler = PageScheduler(FixedGate(8), SlotLimits(per_request=2, per_host=100))
    pages = _Pages(scheduler)
    scheduler.accept(100)
    for n in range(100):
        pages.add(f"big{n}", _ticket("big", priority=0))
    await pages.settle()
    assert pages.started == [f"big{n}" for n in range(8)]
    assert (scheduler.backlog, scheduler.intake_backlog) == (92, 0)

    scheduler.accept(1)
    pages.add("small", _ticket("small", priority=1))
    await pages.settle()
    assert scheduler.intake_backlog == 1
    pages.release["big0"].set()
    await pages.settle()
    assert pages.started[8:] == ["small"]
    pages.release["big1"].set()
    await pages.settle()
    assert pages.started[9:] == ["big8"]
    await pages.close()
    assert (scheduler.in_flight, scheduler.queued) == (0, 0)


async def test_a_page_waiting_for_its_host_holds_no_slot():
    """Per-host limit 1: the second page of a busy host waits outside the slots, and a page
    of another host, from a younger request, takes the free slot."""
    scheduler = PageScheduler(FixedGate(3), SlotLimits(per_request=4, per_host=1))
    pages = _Pages(scheduler)
    pages.add("old-a", _ticket("old", priority=0, host="busy.example"))
    pages.add("old-b", _ticket("old", priority=0, host="busy.example"))
    pages.add("young", _ticket("young", priority=1, host="other.example"))
    await pages.settle()
    assert pages.started == ["old-a", "young"]
    assert (scheduler.in_flight, scheduler.queued) == (2, 1)
    pages.release["old-a"].set()
    await pages.settle()
    assert pages.started == ["old-a", "young", "old-b"]
    await pages.close()


async def test_a_caller_cancelled_as_its_slot_is_granted_frees_it():
    """Cancelled in the same turn as its slot is granted (either order): the slot is freed
    and the next waiter still runs."""
    for cancel_first in (False, True):
        scheduler = PageScheduler(FixedGate(1), ROOMY)
        pages = _Pages(scheduler)
        for name in ("holder", "cancelled", "next"):
            pages.add(name, _ticket())
        await pages.settle()
        if cancel_first:
            pages.tasks["cancelled"].cancel()
        pages.release["holder"].set()
        pages.tasks["cancelled"].cancel()
        await pages.settle()
        assert pages.started == ["holder", "next"]
        with pytest.raises(asyncio.CancelledError):
            await pages.tasks.pop("cancelled")
        await pages.close()
        assert (scheduler.in_flight, scheduler.queued) == (0, 0)


async def test_work_that_raises_frees_its_slot_and_its_hosts_place():
    """A failing page leaves neither its slot nor its host's place taken."""
    scheduler = PageScheduler(FixedGate(1), SlotLimits(per_request=1, per_host=1))

    async def boom() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await scheduler.run(boom, _ticket())
    async with asyncio.timeout(5):
        assert await scheduler.run(lambda: asyncio.sleep(0, "ok"), _ticket()) == "ok"
    assert (scheduler.in_flight, scheduler.queued) == (0, 0)
