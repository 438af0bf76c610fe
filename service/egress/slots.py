"""The egress proxy's connection cap: how many connections are open, and when to say it is full.

Pure accounting with an injected clock: the proxy asks `admit()` for every accepted connection
and calls `release()` when one ends. A connection past the cap is closed at once; refusals are
reported in one log line at most every `report_interval_s`, with the number refused since the
last line, so a flood cannot turn into a flood of log lines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

REPORT_INTERVAL_S: Final = 10.0
"""Least time between two log lines about refused connections."""

DESCRIPTORS_PER_CONNECTION: Final = 2
"""A relayed connection holds the client's socket and the target's."""

DESCRIPTOR_RESERVE: Final = 256
"""Descriptors the worker needs besides the proxy's (broker, browser pipes, logs, metrics)."""


def descriptors_needed(capacity: int) -> int:
    """File descriptors a worker needs so that `capacity` proxy connections never exhaust
    them: with fewer, the cap cannot protect the worker."""
    return capacity * DESCRIPTORS_PER_CONNECTION + DESCRIPTOR_RESERVE


@dataclass(slots=True, kw_only=True)
class ConnectionSlots:
    """At most `capacity` connections at once; counts and rate-limits the refusals."""

    capacity: int
    report_interval_s: float = REPORT_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    open: int = 0
    """Connections admitted and not yet released."""
    refused_total: int = 0
    """Connections refused since start."""
    _unreported: int = 0
    _last_report: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError("the connection cap must be at least 1")

    def admit(self) -> bool:
        """Take a slot for a new connection; False (and one more refusal) when all are taken."""
        if self.open < self.capacity:
            self.open += 1
            return True
        self.refused_total += 1
        self._unreported += 1
        return False

    def release(self) -> None:
        """Give back the slot of a connection that ended."""
        if self.open <= 0:
            raise RuntimeError("released a connection slot that was never taken")
        self.open -= 1

    def refusals_to_report(self) -> int:
        """Refusals to put in a log line now: those since the last line, or 0 when a line was
        written less than `report_interval_s` ago (they are kept for the next one)."""
        now = self.clock()
        recent = self._last_report is not None and now - self._last_report < self.report_interval_s
        if self._unreported == 0 or recent:
            return 0
        count, self._unreported, self._last_report = self._unreported, 0, now
        return count
