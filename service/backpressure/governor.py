"""The memory governor: pure policy over `MemorySnapshot`s. No I/O, no clock (time is passed in).

Levels, by the snapshot's utilization of its limit: comfortable (< resume_ratio), steady,
high (>= pause_ratio), critical (>= critical_ratio); the snapshot's `is_overloaded` (the hard
limit) lies above them all.

- Page cost: learned from observations (`_page_cost.py`): (used - idle baseline) / in_flight,
  rising fast and falling slowly, never below `min_page_cost_bytes`.
- Concurrency: AIMD between floor and ceiling (`_aimd.py`), starting at the floor. It grows by
  one page after `increase_window_s` of comfortable memory with headroom for every free slot
  plus one more page plus the margin; it is cut by `decrease_factor` at the high and critical
  levels, at most once per `decrease_cooldown_s`. Additive growth probes slowly for room;
  multiplicative cuts get out of trouble in a few samples.
- Admission: below the floor always (a replica makes progress) unless critical with a page
  already in flight; otherwise under the limit and with free memory for one more page + margin.
  Free memory is the headroom less what the pages in flight have yet to allocate: each is
  expected to cost the page cost, and only what the snapshot shows above the idle baseline
  is spent already. A page admitted after the snapshot, or one still loading, holds its share
  until it shows in a snapshot, so a burst of admissions between two samples cannot promise
  the same headroom twice.
- Pause (hysteresis): pause when memory is high, or when the backlog is full and no page can
  start; resume when the backlog is at its low-water mark and memory is back below the
  resume ratio (below the pause ratio when the pause was for the backlog alone). Never pause a
  starving replica (empty backlog, fewer pages than the floor): it resumes at once.
- Shed: at the critical level, hand back the newest pages until the projected use is below the
  pause ratio; keep one page in flight unless the snapshot is at the hard limit; once per
  `shed_settle_s` of snapshot time, so pages handed back can close before the next decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, Self, TypeVar

from service.backpressure._aimd import AimdLimit
from service.backpressure._page_cost import PageCostModel
from service.backpressure._thresholds import (
    BACKLOG_RESUME_RATIO,
    CRITICAL_RATIO,
    DECREASE_COOLDOWN_S,
    DECREASE_FACTOR,
    INCREASE_WINDOW_S,
    INITIAL_PAGE_COST_BYTES,
    MIN_PAGE_COST_BYTES,
    PAUSE_RATIO,
    RECYCLE_AFTER_PAGES,
    RECYCLE_GROWTH_BYTES,
    RESUME_RATIO,
    SHED_SETTLE_S,
    Level,
    Thresholds,
)
from service.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from service.backpressure.snapshot import MemorySnapshot

T = TypeVar("T")


class AdmissionReason(StrEnum):
    """Why a page was, or was not, admitted."""

    FLOOR = "floor"
    HEADROOM = "headroom"
    CRITICAL = "critical"
    LIMIT = "limit"
    NO_HEADROOM = "no_headroom"


class PauseReason(StrEnum):
    """Why the partitions are paused."""

    MEMORY = "memory"
    BACKLOG = "backlog"


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    """Whether a page may start now, and why (for the log line)."""

    admitted: bool
    reason: AdmissionReason


class GovernorSettings(Protocol):
    """The settings fields the governor is built from."""

    @property
    def max_page_slots(self) -> int: ...
    @property
    def min_page_slots(self) -> int: ...
    @property
    def memory_safety_margin(self) -> int: ...
    @property
    def memory_resume_ratio(self) -> float: ...
    @property
    def memory_pause_ratio(self) -> float: ...
    @property
    def memory_critical_ratio(self) -> float: ...
    @property
    def initial_page_cost(self) -> int: ...
    @property
    def browser_recycle_pages(self) -> int: ...
    @property
    def browser_recycle_growth(self) -> int: ...


class Governor:
    """Decides how many pages may run, when to pause Kafka, what to shed, when to recycle."""

    def __init__(
        self,
        ceiling: int,
        *,
        floor: int = 1,
        safety_margin_bytes: int,
        resume_ratio: float = RESUME_RATIO,
        pause_ratio: float = PAUSE_RATIO,
        critical_ratio: float = CRITICAL_RATIO,
        backlog_resume_ratio: float = BACKLOG_RESUME_RATIO,
        initial_page_cost_bytes: int = INITIAL_PAGE_COST_BYTES,
        min_page_cost_bytes: int = MIN_PAGE_COST_BYTES,
        increase_window_s: float = INCREASE_WINDOW_S,
        decrease_cooldown_s: float = DECREASE_COOLDOWN_S,
        decrease_factor: float = DECREASE_FACTOR,
        shed_settle_s: float = SHED_SETTLE_S,
        recycle_after_pages: int = RECYCLE_AFTER_PAGES,
        recycle_growth_bytes: int = RECYCLE_GROWTH_BYTES,
    ) -> None:
        if not 1 <= floor <= ceiling:
            raise ConfigurationError(f"need 1 <= floor <= ceiling, got {floor} and {ceiling}")
        self._t = Thresholds(
            safety_margin_bytes=safety_margin_bytes,
            resume_ratio=resume_ratio,
            pause_ratio=pause_ratio,
            critical_ratio=critical_ratio,
            backlog_resume_ratio=backlog_resume_ratio,
            shed_settle_s=shed_settle_s,
            recycle_after_pages=recycle_after_pages,
            recycle_growth_bytes=recycle_growth_bytes,
        )
        self._cost = PageCostModel(
            cost_bytes=max(initial_page_cost_bytes, min_page_cost_bytes),
            min_cost_bytes=min_page_cost_bytes,
        )
        self._limit = AimdLimit(
            value=floor,
            floor=floor,
            ceiling=ceiling,
            increase_window_s=increase_window_s,
            decrease_cooldown_s=decrease_cooldown_s,
            decrease_factor=decrease_factor,
        )
        self._pause_reason: PauseReason | None = None
        self._pause_count = 0
        self._last_shed_at: float | None = None

    @classmethod
    def from_settings(cls, settings: GovernorSettings) -> Self:
        return cls(
            settings.max_page_slots,
            floor=settings.min_page_slots,
            safety_margin_bytes=settings.memory_safety_margin,
            resume_ratio=settings.memory_resume_ratio,
            pause_ratio=settings.memory_pause_ratio,
            critical_ratio=settings.memory_critical_ratio,
            initial_page_cost_bytes=settings.initial_page_cost,
            recycle_after_pages=settings.browser_recycle_pages,
            recycle_growth_bytes=settings.browser_recycle_growth,
        )

    @property
    def limit(self) -> int:
        """Pages that may run at once now."""
        return self._limit.value

    @property
    def page_cost_bytes(self) -> int:
        """Expected cost of one more open page."""
        return self._cost.cost_bytes

    @property
    def paused(self) -> bool:
        return self._pause_reason is not None

    @property
    def pause_reason(self) -> PauseReason | None:
        return self._pause_reason

    @property
    def pause_count(self) -> int:
        """How many times `should_pause` has switched to paused."""
        return self._pause_count

    def level(self, snapshot: MemorySnapshot) -> Level:
        return self._t.level(snapshot)

    def observe(self, snapshot: MemorySnapshot, in_flight: int, now: float) -> None:
        """Learn the page cost and adapt the limit; `now` is monotonic seconds."""
        self._cost.observe(
            used_bytes=snapshot.used_bytes, limit_bytes=snapshot.limit_bytes, in_flight=in_flight
        )
        level = self._t.level(snapshot)
        if level >= Level.HIGH:
            self._limit.pressure(now)
        elif level is Level.COMFORTABLE and self._room_to_grow(snapshot, in_flight):
            self._limit.comfortable(now, self._largest_fitting_limit(snapshot, in_flight))
        else:
            self._limit.neutral()

    def admit(self, snapshot: MemorySnapshot, in_flight: int) -> bool:
        return self.admission(snapshot, in_flight).admitted

    def admission(self, snapshot: MemorySnapshot, in_flight: int) -> Admission:
        """`admit` with its reason."""
        if in_flight >= 1 and self._t.level(snapshot) is Level.CRITICAL:
            return Admission(admitted=False, reason=AdmissionReason.CRITICAL)
        if in_flight < self._limit.floor:
            return Admission(admitted=True, reason=AdmissionReason.FLOOR)
        if in_flight >= self._limit.value:
            return Admission(admitted=False, reason=AdmissionReason.LIMIT)
        if (
            self._free_bytes(snapshot, in_flight)
            < self._cost.cost_bytes + self._t.safety_margin_bytes
        ):
            return Admission(admitted=False, reason=AdmissionReason.NO_HEADROOM)
        return Admission(admitted=True, reason=AdmissionReason.HEADROOM)

    def should_pause(
        self,
        snapshot: MemorySnapshot,
        in_flight: int,
        backlog: int,
        backlog_capacity: int,
        *,
        startable: bool = True,
    ) -> bool:
        """Whether the partitions should be paused now (remembers the answer: hysteresis).

        `startable`: some waiting page could start if memory admitted it (False when every
        waiting page waits for its host's limit): a full backlog then pauses too.
        """
        starving = backlog == 0 and in_flight < self._limit.floor
        if self._pause_reason is None and not starving:
            self._pause_reason = self._pause_cause(
                snapshot, in_flight, backlog, backlog_capacity, startable=startable
            )
            if self._pause_reason is not None:
                self._pause_count += 1
        elif starving or self._recovered(snapshot, backlog, backlog_capacity):
            self._pause_reason = None
        return self._pause_reason is not None

    def shed(self, snapshot: MemorySnapshot, in_flight: int) -> int:
        """How many of the newest in-flight pages to hand back now (see the module docstring)."""
        if self._t.level(snapshot) is not Level.CRITICAL or self._settling(snapshot):
            return 0
        keep = 0 if snapshot.is_overloaded else 1
        excess = snapshot.used_bytes - self._t.pause_ratio * snapshot.limit_bytes
        wanted = max(math.ceil(excess / self._cost.cost_bytes), 1)
        count = max(min(wanted, in_flight - keep), 0)
        if count:
            self._last_shed_at = snapshot.taken_at
        return count

    def should_recycle_browser(self, pages_since_start: int, tree_pss_growth_bytes: int) -> bool:
        return (
            pages_since_start >= self._t.recycle_after_pages
            or tree_pss_growth_bytes >= self._t.recycle_growth_bytes
        )

    def _free_bytes(self, snapshot: MemorySnapshot, in_flight: int) -> int:
        """The headroom less what the `in_flight` pages have yet to allocate."""
        return snapshot.headroom_bytes - self._cost.unallocated_bytes(
            used_bytes=snapshot.used_bytes, in_flight=in_flight
        )

    def _largest_fitting_limit(self, snapshot: MemorySnapshot, in_flight: int) -> int:
        """The largest limit whose free slots, each at the page cost, fit the free memory."""
        spare = self._free_bytes(snapshot, in_flight) - self._t.safety_margin_bytes
        return in_flight + max(spare // self._cost.cost_bytes, 0)

    def _room_to_grow(self, snapshot: MemorySnapshot, in_flight: int) -> bool:
        """Free memory for every free slot of a limit one larger, plus the margin."""
        slots = max(self._limit.value + 1 - in_flight, 1)
        needed = slots * self._cost.cost_bytes + self._t.safety_margin_bytes
        return self._free_bytes(snapshot, in_flight) >= needed

    def _pause_cause(
        self,
        snapshot: MemorySnapshot,
        in_flight: int,
        backlog: int,
        backlog_capacity: int,
        *,
        startable: bool,
    ) -> PauseReason | None:
        if self._t.level(snapshot) >= Level.HIGH:
            return PauseReason.MEMORY
        stuck = not startable or not self.admit(snapshot, in_flight)
        if backlog >= backlog_capacity and stuck:
            return PauseReason.BACKLOG
        return None

    def _recovered(self, snapshot: MemorySnapshot, backlog: int, backlog_capacity: int) -> bool:
        drained = backlog <= backlog_capacity * self._t.backlog_resume_ratio
        calm = Level.COMFORTABLE if self._pause_reason is PauseReason.MEMORY else Level.STEADY
        return drained and self._t.level(snapshot) <= calm

    def _settling(self, snapshot: MemorySnapshot) -> bool:
        last = self._last_shed_at
        return last is not None and snapshot.taken_at - last < self._t.shed_settle_s


def newest_first(started: Sequence[T], count: int) -> list[T]:
    """The `count` most recently started of `started` (oldest first), newest first: the pages
    `Governor.shed` hands back."""
    return list(reversed(started[-count:])) if count > 0 else []
