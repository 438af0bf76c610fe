"""The gate: carries the governor's decisions to the page slots, the consumer and the browser.

The sampler calls `on_sample` with each snapshot; the scheduler asks a `SlotAdmission` (built
first: then the scheduler, then the gate, in order); the consumer asks `should_pause` before
each poll, which weighs the scheduler's intake backlog: pages a request taken now would wait
behind (the waiting pages of a request already rendering more than its share do not count: a
new request goes before them). Every pause, resume and shed
is logged with the figures that caused it, and a change of the limit that binds (the worker's
own cgroup, an ancestor's, the configured one) as `memory.bound`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from service.backpressure._thresholds import Level
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.backpressure.governor import Governor
    from service.backpressure.snapshot import MemorySnapshot
    from service.metrics import Metrics

log = get_logger(__name__)


class Slots(Protocol):
    """What the gate sees of the page slots (the worker's scheduler)."""

    @property
    def in_flight(self) -> int: ...
    @property
    def intake_backlog(self) -> int: ...
    @property
    def backlog(self) -> int: ...
    @property
    def paced(self) -> int: ...
    @property
    def startable(self) -> bool: ...
    def shed(self, count: int) -> int: ...
    def poke(self) -> None: ...


class Browsers(Protocol):
    """What the gate asks of the browser pool under memory pressure."""

    keep_idle_pages: bool

    @property
    def generation(self) -> int: ...
    @property
    def pages_served(self) -> int: ...
    def trim_idle(self) -> None: ...
    def recycle(self, reason: str, cause: str) -> None:
        """Replace the browser; the replacement is counted under `cause`."""


class SlotAdmission:
    """Whether one more page may start: the governor's answer on the latest snapshot (the
    gate keeps it current), or the slot ceiling when the governor does not enforce."""

    def __init__(
        self, governor: Governor, first: MemorySnapshot, *, enforce: bool = True, ceiling: int = 1
    ) -> None:
        self.governor = governor
        self.snapshot = first
        self.enforce = enforce
        self._ceiling = ceiling

    def admit(self, in_flight: int) -> bool:
        if not self.enforce:
            return in_flight < self._ceiling
        return self.governor.admit(self.snapshot, in_flight)


class MemoryGate:
    """Pause and shedding driven by memory snapshots and the governor, for the page slots
    (`slots`, built with `admission`) and the browsers (None: a gate without a browser)."""

    def __init__(
        self,
        admission: SlotAdmission,
        metrics: Metrics,
        *,
        slots: Slots,
        browsers: Browsers | None,
        backlog_capacity: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._admission = admission
        self._governor = admission.governor
        self._enforce = admission.enforce
        self._metrics = metrics
        self._backlog_capacity = backlog_capacity
        self._clock = clock
        self._scheduler = slots
        self._pool = browsers
        first = admission.snapshot
        self._browser_generation = 0
        self._browser_baseline = first.tree_pss_bytes
        self._paused = False
        self._bound = first.bound_by
        metrics.memory_limit.set(first.limit_bytes)
        metrics.memory_bound.labels(first.bound_by).set(1)

    @property
    def _snapshot(self) -> MemorySnapshot:
        return self._admission.snapshot

    @property
    def paused(self) -> bool:
        """The last answer of `should_pause`."""
        return self._paused

    def should_pause(self) -> bool:
        if not self._enforce:
            return False
        scheduler = self._scheduler
        in_flight = scheduler.in_flight
        backlog = scheduler.intake_backlog
        paused = self._governor.should_pause(
            self._snapshot,
            in_flight,
            backlog,
            self._backlog_capacity,
            startable=scheduler.startable,
        )
        if paused != self._paused:
            self._paused = paused
            log.info(
                "memory.pause" if paused else "memory.resume",
                reason=str(self._governor.pause_reason),
                in_flight=in_flight,
                backlog=backlog,
                queued=scheduler.backlog,
                paced=scheduler.paced,
                **self._figures(),
            )
        return paused

    def on_sample(self, snapshot: MemorySnapshot) -> None:
        self._admission.snapshot = snapshot
        scheduler = self._scheduler
        in_flight = scheduler.in_flight
        self._governor.observe(snapshot, in_flight, self._clock())
        self._export(snapshot)
        self._metrics.pages_queued.set(scheduler.backlog)
        if not self._enforce:
            return
        if self._pool is not None:
            self._pool.keep_idle_pages = self._governor.level(snapshot) is Level.COMFORTABLE
        shed = self._governor.shed(snapshot, in_flight)
        if shed:
            handed_back = scheduler.shed(shed)
            self._metrics.pages_shed.inc(handed_back)
            if self._pool is not None:
                self._pool.trim_idle()
            log.warning("memory.shed", pages=handed_back, in_flight=in_flight, **self._figures())
        scheduler.poke()
        self._check_browser(snapshot, in_flight)

    def _check_browser(self, snapshot: MemorySnapshot, in_flight: int) -> None:
        """Recycle a browser that grew beyond what its open pages account for (a leak)."""
        pool = self._pool
        if pool is None:
            return
        if pool.generation != self._browser_generation:
            self._browser_generation = pool.generation
            self._browser_baseline = snapshot.tree_pss_bytes
            return
        pages = in_flight * self._governor.page_cost_bytes
        growth = snapshot.tree_pss_bytes - self._browser_baseline - pages
        if self._governor.should_recycle_browser(pool.pages_served, growth):
            pool.recycle(f"grew {growth // 2**20} MiB over {pool.pages_served} pages", "memory")

    def _note_bound(self, snapshot: MemorySnapshot) -> None:
        """Log and export a change of the limit that binds (e.g. a sidecar filled the pod)."""
        if snapshot.bound_by == self._bound:
            return
        self._metrics.memory_bound.labels(self._bound).set(0)
        self._metrics.memory_bound.labels(snapshot.bound_by).set(1)
        log.info(
            "memory.bound", previous=self._bound, cgroup=snapshot.cgroup_path, **self._figures()
        )
        self._bound = snapshot.bound_by

    def _export(self, snapshot: MemorySnapshot) -> None:
        self._note_bound(snapshot)
        metrics = self._metrics
        metrics.memory_limit.set(snapshot.limit_bytes)
        metrics.memory_working_set.set(snapshot.working_set_bytes)
        metrics.memory_tree_pss.set(snapshot.tree_pss_bytes)
        metrics.memory_headroom.set(snapshot.headroom_bytes)
        metrics.page_cost.set(self._governor.page_cost_bytes)
        metrics.concurrency_limit.set(self._governor.limit)

    def _figures(self) -> dict[str, str | int | float]:
        snapshot = self._snapshot
        return {
            "bound_by": snapshot.bound_by,
            "limit_mib": snapshot.limit_bytes // 2**20,
            "used_mib": snapshot.used_bytes // 2**20,
            "headroom_mib": snapshot.headroom_bytes // 2**20,
            "page_cost_mib": self._governor.page_cost_bytes // 2**20,
            "concurrency_limit": self._governor.limit,
            "utilization": round(snapshot.utilization, 3),
        }
