"""Additive-increase / multiplicative-decrease of the page concurrency limit.

Until the first sign of pressure the limit doubles after each comfortable window (slow start,
as in TCP: a fresh replica reaches its ceiling in a few seconds instead of one page per
window); after that it grows by one page after memory has stayed comfortable for a whole
window, and is cut
by a factor on pressure, at most once per cooldown so that pages handed back have time to close
before the next cut. It always stays between the floor and the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, kw_only=True)
class AimdLimit:
    """A concurrency limit driven by comfortable / pressure / neutral observations."""

    value: int
    floor: int
    ceiling: int
    increase_window_s: float
    decrease_cooldown_s: float
    decrease_factor: float
    comfortable_since: float | None = None
    last_decrease_at: float | None = None

    def comfortable(self, now: float, room: int) -> None:
        """Memory is comfortable; `room` is the largest limit the headroom would fit now."""
        if self.comfortable_since is None:
            self.comfortable_since = now
        elif now - self.comfortable_since >= self.increase_window_s:
            step = self.value if self.last_decrease_at is None else 1
            self.value = max(min(self.value + step, self.ceiling, room), self.value)
            self.comfortable_since = now

    def neutral(self) -> None:
        self.comfortable_since = None

    def pressure(self, now: float) -> None:
        self.comfortable_since = None
        last = self.last_decrease_at
        if last is None or now - last >= self.decrease_cooldown_s:
            self.value = max(int(self.value * self.decrease_factor), self.floor)
            self.last_decrease_at = now
