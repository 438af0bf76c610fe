"""Adaptive refetch intervals per target, StormCrawler's `AdaptiveScheduler` rule: after a
check in which the target changed, its interval halves toward the minimum; after one in which
it did not, it grows by half toward the maximum. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Adaptive:
    """A target's bounds: its interval stays within `[minimum, maximum]`."""

    minimum: timedelta
    maximum: timedelta

    def __post_init__(self) -> None:
        if not timedelta(0) < self.minimum <= self.maximum:
            msg = "adaptive: 0 < minimum <= maximum is required"
            raise ValueError(msg)

    def start(self) -> timedelta:
        """A new target starts at the minimum (nothing known about it yet)."""
        return self.minimum

    def next_interval(self, current: timedelta, *, changed: bool) -> timedelta:
        """The interval after a check: halved on change, else grown by half, bounded."""
        proposed = current / 2 if changed else current * 1.5
        return min(self.maximum, max(self.minimum, proposed))

    @staticmethod
    def due(last_checked: datetime | None, interval: timedelta, tick: datetime) -> bool:
        """Whether a target checked at `last_checked` is checked again at `tick`."""
        return last_checked is None or tick - last_checked >= interval
