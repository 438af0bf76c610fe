"""Page slots: the gate bounds concurrency, waiters run in order, shed pages run again."""

from __future__ import annotations

import asyncio

from service.worker.scheduler import FixedGate, PageScheduler


async def test_gate_bounds_concurrency_and_everything_runs():
    """No more than the gate's limit run at once, and every piece of work finishes."""
    scheduler = PageScheduler(FixedGate(2))
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

    tasks = [asyncio.create_task(scheduler.run(lambda n=n: work(n))) for n in range(5)]
    while running < 2 or scheduler.queued < 3:
        await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*tasks) == list(range(5))
    assert peak == 2
    assert scheduler.in_flight == 0


async def test_shed_work_goes_back_to_the_front_and_runs_again():
    """The newest running page is handed back, queued first, and still gives its result."""
    scheduler = PageScheduler(FixedGate(2))
    attempts: dict[str, int] = {}
    gates = {name: asyncio.Event() for name in "abc"}

    async def work(name: str) -> str:
        attempts[name] = attempts.get(name, 0) + 1
        await gates[name].wait()
        return name

    tasks = {n: asyncio.create_task(scheduler.run(lambda n=n: work(n))) for n in "abc"}
    while attempts.keys() != {"a", "b"}:
        await asyncio.sleep(0)
    assert scheduler.shed(1) == 1
    while attempts.get("b") != 2:
        await asyncio.sleep(0)
    assert "c" not in attempts
    for gate in gates.values():
        gate.set()
    assert [await tasks[n] for n in "abc"] == ["a", "b", "c"]
    assert attempts == {"a": 1, "b": 2, "c": 1}


async def test_cancelled_caller_frees_its_slot():
    """A caller cancelled while waiting or running leaves no slot taken."""
    scheduler = PageScheduler(FixedGate(1))
    blocker = asyncio.Event()
    first = asyncio.create_task(scheduler.run(blocker.wait))
    second = asyncio.create_task(scheduler.run(blocker.wait))
    while scheduler.queued < 1:
        await asyncio.sleep(0)
    second.cancel()
    first.cancel()
    await asyncio.gather(first, second, return_exceptions=True)
    assert (scheduler.in_flight, scheduler.queued) == (0, 0)
