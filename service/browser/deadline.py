"""One page's deadline, shared by every browser step of its fetch."""

from __future__ import annotations

import asyncio
from typing import Final

MIN_STEP_S: Final = 1.0
"""The least time any browser step is given, even when the deadline is nearly spent."""


class StepDeadline:
    """Started on creation (or at `start`, a time of the running loop); each step asks how
    long it may take."""

    def __init__(self, seconds: float, *, start: float | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._start = self._loop.time() if start is None else start
        self._end = self._start + seconds

    def share(self, part: float) -> StepDeadline:
        """A deadline started with this one that ends after `part` of its time."""
        return StepDeadline((self._end - self._start) * part, start=self._start)

    def left_s(self) -> float:
        """What is really left (0 once past)."""
        return max(0.0, self._end - self._loop.time())

    def remaining_s(self) -> float:
        """What a step may take: what is left, but at least `MIN_STEP_S`."""
        return max(MIN_STEP_S, self.left_s())

    def remaining_ms(self) -> float:
        return self.remaining_s() * 1000
