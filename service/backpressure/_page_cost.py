"""Learn what one open page costs from (used memory, pages in flight) observations.

The idle baseline is learned while nothing is in flight; a busy observation then yields one
sample `(used - baseline) / in_flight`. Both move asymmetrically, towards the conservative side:
the baseline follows a drop at once and rises slowly, the cost rises fast and falls slowly, so a
page that has not grown yet, or memory Chromium has not returned yet, does not make the next
page look cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

COST_RISE = 0.5
"""EWMA weight of a sample above the current cost estimate."""

COST_FALL = 0.1
"""EWMA weight of a sample below the current cost estimate."""

BASELINE_RISE = 0.1
"""EWMA weight of an idle reading above the current baseline (a lower one replaces it)."""


@dataclass(slots=True, kw_only=True)
class PageCostModel:
    """Expected bytes per open page, and the idle baseline they are measured from."""

    cost_bytes: int
    min_cost_bytes: int
    baseline_bytes: int | None = None

    def observe(self, *, used_bytes: int, limit_bytes: int, in_flight: int) -> None:
        if in_flight == 0:
            self._observe_idle(used_bytes)
        elif self.baseline_bytes is not None and used_bytes > self.baseline_bytes:
            sample = (used_bytes - self.baseline_bytes) // in_flight
            self._observe_sample(min(max(sample, self.min_cost_bytes), limit_bytes))

    def unallocated_bytes(self, *, used_bytes: int, in_flight: int) -> int:
        """What `in_flight` pages, each expected at the cost, have yet to allocate given
        `used_bytes`: all of it before an idle baseline is known."""
        expected = in_flight * self.cost_bytes
        spent = 0 if self.baseline_bytes is None else max(used_bytes - self.baseline_bytes, 0)
        return max(expected - spent, 0)

    def _observe_idle(self, used_bytes: int) -> None:
        if self.baseline_bytes is None or used_bytes < self.baseline_bytes:
            self.baseline_bytes = used_bytes
        else:
            self.baseline_bytes += round(BASELINE_RISE * (used_bytes - self.baseline_bytes))

    def _observe_sample(self, sample: int) -> None:
        weight = COST_RISE if sample > self.cost_bytes else COST_FALL
        moved = self.cost_bytes + round(weight * (sample - self.cost_bytes))
        self.cost_bytes = max(moved, self.min_cost_bytes)
