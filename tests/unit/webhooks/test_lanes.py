"""Lanes: a slow receiver holds only its own lane; a job's events stay in order; an error
in one event is counted and the lane goes on."""

from __future__ import annotations

import asyncio

from service.webhooks.lanes import Lanes, Work


async def test_a_stalled_receiver_does_not_hold_another_and_a_jobs_events_stay_in_order():
    failures: list[int] = []
    lanes = Lanes(concurrency=2, depth=4, failed=lambda: failures.append(1))
    stalled = asyncio.Event()
    order: list[str] = []
    done: list[str] = []

    def work(job: str, name: str, *, stall: bool = False, fail: bool = False) -> Work:
        async def run() -> None:
            if stall:
                await stalled.wait()
            if fail:
                raise RuntimeError(name)
            order.append(name)

        return Work(job=job, run=run, done=lambda: done.append(name))

    assert await lanes.of("http://a:1").put(work("ja", "a1", stall=True), timeout_s=1)
    assert await lanes.of("http://a:1").put(work("ja", "a2"), timeout_s=1)
    for name in ("b1", "b2", "b3"):
        assert await lanes.of("http://b:1").put(work("jb", name, fail=name == "b2"), timeout_s=1)
    async with asyncio.timeout(5):
        while len(done) < 3:
            await asyncio.sleep(0.01)
    assert order == ["b1", "b3"]
    assert done == ["b1", "b2", "b3"]  # the failed one is done (counted), not retried forever
    assert failures == [1]
    stalled.set()
    async with asyncio.timeout(5):
        while len(done) < 5:
            await asyncio.sleep(0.01)
    assert order == ["b1", "b3", "a1", "a2"]
    await lanes.reap()
    assert len(lanes) == 0


async def test_a_full_lane_says_so_instead_of_growing():
    lanes = Lanes(concurrency=1, depth=1, failed=lambda: None)
    never = asyncio.Event()

    async def run() -> None:
        await never.wait()

    lane = lanes.of("http://a:1")
    assert lane.offer(Work(job="j", run=run, done=lambda: None))
    await asyncio.sleep(0)  # the slot takes it
    assert await lane.put(Work(job="j", run=run, done=lambda: None), timeout_s=1)
    assert not await lane.put(Work(job="j", run=run, done=lambda: None), timeout_s=0.05)
    assert not lane.offer(Work(job="j", run=run, done=lambda: None))
    await lanes.close()
