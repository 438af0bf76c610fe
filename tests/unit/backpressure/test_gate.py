"""The gate pauses intake on the scheduler's intake backlog, not on one big request's queue."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from service.backpressure import Governor, LimitSource, MemorySnapshot, PauseReason
from service.backpressure.gate import MemoryGate
from service.metrics import Metrics
from service.worker.scheduler import PageScheduler, PageTicket, SlotLimits

MIB = 1 << 20
CAPACITY = 40


def _comfortable() -> MemorySnapshot:
    return MemorySnapshot(
        limit_bytes=8000 * MIB,
        working_set_bytes=500 * MIB,
        tree_pss_bytes=500 * MIB,
        source=LimitSource.CGROUP_V2,
        taken_at=0.0,
    )


async def test_one_big_request_never_pauses_intake_but_a_full_backlog_does():
    """A fresh governor (one page at a time, as at start-up) with a 100-page request queued:
    intake goes on, because a request taken now would start before the big request's pages
    beyond its share. 40 single-page requests waiting behind it do pause it (backlog)."""
    governor = Governor(8, safety_margin_bytes=100 * MIB)
    gate = MemoryGate(
        governor, Metrics(CollectorRegistry()), backlog_capacity=CAPACITY, first=_comfortable()
    )
    scheduler = PageScheduler(gate, SlotLimits(per_request=2, per_host=4))
    gate.attach(scheduler, None)  # no browser: the gate only asks the scheduler here
    hang = asyncio.Event()
    scheduler.accept(100)
    tasks = [
        asyncio.create_task(
            scheduler.run(hang.wait, PageTicket(request="big", priority=0, host="h"))
        )
        for _ in range(100)
    ]
    for _ in range(10):
        await asyncio.sleep(0)
    assert (scheduler.in_flight, scheduler.backlog) == (1, 99)
    assert not gate.should_pause()

    scheduler.accept(CAPACITY)
    tasks += [
        asyncio.create_task(
            scheduler.run(hang.wait, PageTicket(request=f"small-{n}", priority=1 + n, host="h"))
        )
        for n in range(CAPACITY)
    ]
    for _ in range(10):
        await asyncio.sleep(0)
    assert gate.should_pause()
    assert governor.pause_reason is PauseReason.BACKLOG

    hang.set()
    await asyncio.gather(*tasks)
