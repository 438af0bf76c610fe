"""Additive-increase / multiplicative-decrease of the page concurrency limit.

The limit grows by one page after memory has stayed comfortable for a whole window, and is cut
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

    def comfortable(self, now: float) -> None:
        if self.comfortable_since is None:
            self.comfortable_since = now
        elif now - self.comfortable_since >= self.increase_window_s:
            self.value = min(self.value + 1, self.ceiling)
            self.comfortable_since = now

    def neutral(self) -> None:
        self.comfortable_since = None

    def pressure(self, now: float) -> None:
        self.comfortable_since = None
        last = self.last_decrease_at
        if last is None or now - last >= self.decrease_cooldown_s:
            self.value = max(int(self.value * self.decrease_factor), self.floor)
            self.last_decrease_at = now
