"""Adaptive refetch intervals per target, StormCrawler's `AdaptiveScheduler` rule: after a
check in which the target changed, its interval halves toward the minimum; after one in which
it did not, it grows by half toward the maximum. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
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


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetPlan:
    """Which targets a tick checks, and the adaptive targets' state after it."""

    included: tuple[str, ...]
    intervals: dict[str, int]
    """Per adaptive target id: its interval in seconds."""
    checked: dict[str, datetime]
    """Per adaptive target id: the tick it was last checked at."""


def plan_targets(
    targets: Sequence[tuple[str, Adaptive | None]],
    *,
    tick: datetime,
    intervals: Mapping[str, int],
    checked: Mapping[str, datetime],
    changed: Mapping[str, bool],
) -> TargetPlan:
    """The targets tick `tick` checks: every plain target; an adaptive one when its interval
    since its last check has passed. `changed`: per adaptive target whose previous check
    was read, whether it found a change (its interval is adapted first)."""
    included: list[str] = []
    new_intervals: dict[str, int] = {}
    new_checked: dict[str, datetime] = {}
    for target_id, rule in targets:
        if rule is None:
            included.append(target_id)
            continue
        current = timedelta(seconds=intervals.get(target_id, rule.start().total_seconds()))
        if target_id in changed:
            current = rule.next_interval(current, changed=changed[target_id])
        last = checked.get(target_id)
        if Adaptive.due(last, current, tick):
            included.append(target_id)
            last = tick
        new_intervals[target_id] = int(current.total_seconds())
        if last is not None:
            new_checked[target_id] = last
    return TargetPlan(included=tuple(included), intervals=new_intervals, checked=new_checked)
