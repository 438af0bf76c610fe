"""The gate pauses intake on the scheduler's intake backlog: pages a request taken now would
wait behind, which leaves out those of a request already rendering beyond its share."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from service.backpressure import Governor, LimitSource, MemorySnapshot, PauseReason
from service.backpressure.gate import MemoryGate, SlotAdmission
from service.metrics import Metrics
from service.worker.fetcher.scheduler import PageScheduler, PageTicket, SlotLimits

MIB = 1 << 20
CAPACITY = 40
WINDOW_S = 2.0


def _comfortable(at: float = 0.0) -> MemorySnapshot:
    return MemorySnapshot(
        limit_bytes=8000 * MIB,
        working_set_bytes=500 * MIB,
        tree_pss_bytes=500 * MIB,
        source=LimitSource.CGROUP_V2,
        taken_at=at,
    )


class _Worker:
    """A gate and a scheduler wired as the worker wires them; pages hang until `close`."""

    def __init__(self, governor: Governor) -> None:
        self.now = 0.0
        admission = SlotAdmission(governor, _comfortable())
        self.scheduler = PageScheduler(admission, SlotLimits(per_request=2, per_host=100))
        self.gate = MemoryGate(  # no browser: the gate only asks the scheduler
            admission,
            Metrics(CollectorRegistry()),
            slots=self.scheduler,
            browsers=None,
            backlog_capacity=CAPACITY,
            clock=lambda: self.now,
        )
        self.hang = asyncio.Event()
        self.tasks: list[asyncio.Task[object]] = []

    async def take(self, request: str, pages: int, *, priority: int) -> None:
        self.scheduler.accept(pages)
        ticket = PageTicket(run=request, priority=priority, host="h")
        self.tasks += [
            asyncio.create_task(self.scheduler.run(self.hang.wait, ticket)) for _ in range(pages)
        ]
        for _ in range(10):
            await asyncio.sleep(0)

    def comfortable_window(self) -> None:
        self.now += WINDOW_S
        self.gate.on_sample(_comfortable(self.now))

    async def close(self) -> None:
        self.hang.set()
        await asyncio.gather(*self.tasks)


async def test_a_big_request_beyond_its_share_does_not_pause_intake_but_a_full_backlog_does():
    """All 8 slots busy with one 100-page request: its 92 waiting pages do not pause intake
    (a request taken now would get the next free slot); 40 one-page requests do (backlog)."""
    governor = Governor(8, floor=8, safety_margin_bytes=100 * MIB)
    worker = _Worker(governor)
    await worker.take("big", 100, priority=0)
    assert (worker.scheduler.in_flight, worker.scheduler.backlog) == (8, 92)
    assert not worker.gate.should_pause()

    for n in range(CAPACITY):
        await worker.take(f"small-{n}", 1, priority=1 + n)
    assert worker.gate.should_pause()
    assert governor.pause_reason is PauseReason.BACKLOG
    await worker.close()


async def test_a_pause_at_the_start_up_limit_ends_once_the_big_request_renders_beyond_its_share():
    """At the start-up limit of one page a request taken now would wait behind the big
    request's pages, so intake pauses; once slow start lets the big request render more
    than its share, intake resumes while its pages still wait (no waiting for it to drain)."""
    worker = _Worker(Governor(8, safety_margin_bytes=100 * MIB, increase_window_s=WINDOW_S))
    await worker.take("big", 100, priority=0)
    assert worker.scheduler.in_flight == 1
    assert worker.gate.should_pause()

    for _ in range(3):  # slow start: the limit doubles per comfortable window, 1 -> 4
        worker.comfortable_window()
    await asyncio.sleep(0)
    assert worker.scheduler.in_flight == 4
    assert worker.scheduler.backlog > CAPACITY
    assert not worker.gate.should_pause()
    await worker.close()


def test_a_change_of_the_binding_cgroup_level_is_logged_and_exported():
    """When a sibling fills the pod, the pod's limit binds: `memory.bound` names it with its
    figures, and `crawl_memory_bound{by}` moves its 1 from `own` to `parent`."""
    registry = CollectorRegistry()
    own = replace(_comfortable(), cgroup_level="own", cgroup_path="/pod/worker")
    admission = SlotAdmission(Governor(8, safety_margin_bytes=100 * MIB), own)
    slots = PageScheduler(admission, SlotLimits(per_request=2, per_host=100))
    gate = MemoryGate(admission, Metrics(registry), slots=slots, browsers=None, backlog_capacity=8)
    pod = replace(own, limit_bytes=1228 * MIB, working_set_bytes=1000 * MIB, cgroup_level="parent")
    with capture_logs() as logs:
        gate.on_sample(replace(own, taken_at=1.0))
        gate.on_sample(replace(pod, cgroup_path="/pod", taken_at=2.0))
    assert [(e["event"], e["previous"], e["bound_by"], e["cgroup"]) for e in logs] == [
        ("memory.bound", "own", "parent", "/pod")
    ]
    assert logs[0]["headroom_mib"] == 228
    bound = {
        by: registry.get_sample_value("crawl_memory_bound", {"by": by}) for by in ("own", "parent")
    }
    assert bound == {"own": 0.0, "parent": 1.0}


async def test_pages_waiting_for_their_host_delay_do_not_pause_intake_but_waiting_pages_do():
    """A deep crawl's 2,000 pages waiting for their host's politeness delay (`delay_ms`) are
    pending but no backlog: intake stays open (before, 1,999 of them paused it for every
    other request). Pages waiting for a slot still fill the backlog and pause intake."""
    governor = Governor(8, floor=8, safety_margin_bytes=100 * MIB)
    worker = _Worker(governor)
    scheduler = worker.scheduler

    async def paced() -> None:
        with scheduler.pacing():
            await worker.hang.wait()

    scheduler.accept(2_000)
    worker.tasks += [asyncio.create_task(paced()) for _ in range(2_000)]
    await asyncio.sleep(0)
    assert (scheduler.paced, scheduler.pending, scheduler.backlog) == (2_000, 2_000, 0)
    assert not worker.gate.should_pause()

    for n in range(8 + CAPACITY):  # 8 render, 40 wait for a slot
        await worker.take(f"small-{n}", 1, priority=1 + n)
    assert (scheduler.in_flight, scheduler.backlog) == (8, CAPACITY)
    assert worker.gate.should_pause()
    assert governor.pause_reason is PauseReason.BACKLOG
    await worker.close()
    assert scheduler.paced == 0
