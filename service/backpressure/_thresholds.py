"""The governor's thresholds: named defaults, the levels of utilization, validation."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

from service.errors import ConfigurationError

if TYPE_CHECKING:
    from service.backpressure.snapshot import MemorySnapshot

MIB = 1 << 20
"""One mebibyte."""

INITIAL_PAGE_COST_BYTES = 150 * MIB
"""Cost of a page before any is measured: above a fresh context's ~65 MB PSS, on purpose."""

MIN_PAGE_COST_BYTES = 24 * MIB
"""The learned cost never drops below this (a flagged-down context costs ~30 MB)."""

CRITICAL_RATIO = 0.92
"""Utilization at which pages are handed back and nothing new starts."""

PAUSE_RATIO = 0.85
"""Utilization at which the partitions are paused and the limit is cut."""

RESUME_RATIO = 0.70
"""Utilization below which paused partitions may resume and the limit may grow."""

BACKLOG_RESUME_RATIO = 0.5
"""Share of the backlog capacity at or below which paused partitions may resume."""

INCREASE_WINDOW_S = 2.0
"""Seconds of comfortable memory before the limit grows by one page."""

DECREASE_COOLDOWN_S = 1.0
"""Seconds between two cuts of the limit."""

DECREASE_FACTOR = 0.5
"""Factor the limit is multiplied by on pressure."""

SHED_SETTLE_S = 1.0
"""Snapshot seconds between two shedding decisions."""

RECYCLE_AFTER_PAGES = 2000
"""Pages after which the browser is replaced."""

RECYCLE_GROWTH_BYTES = 512 * MIB
"""Growth of the browser tree's PSS since its start after which it is replaced."""


class Level(IntEnum):
    """How close memory is to the limit, from the snapshot's utilization."""

    COMFORTABLE = 0
    STEADY = 1
    HIGH = 2
    CRITICAL = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    safety_margin_bytes: int
    resume_ratio: float
    pause_ratio: float
    critical_ratio: float
    backlog_resume_ratio: float
    shed_settle_s: float
    recycle_after_pages: int
    recycle_growth_bytes: int

    def __post_init__(self) -> None:
        if not 0 < self.resume_ratio < self.pause_ratio < self.critical_ratio <= 1:
            raise ConfigurationError("need 0 < resume ratio < pause ratio < critical ratio <= 1")
        if self.safety_margin_bytes < 0:
            raise ConfigurationError("the memory safety margin cannot be negative")

    def level(self, snapshot: MemorySnapshot) -> Level:
        ratio = snapshot.utilization
        if ratio >= self.critical_ratio:
            return Level.CRITICAL
        if ratio >= self.pause_ratio:
            return Level.HIGH
        return Level.STEADY if ratio >= self.resume_ratio else Level.COMFORTABLE
