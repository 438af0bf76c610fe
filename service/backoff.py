"""Exponential backoff with full jitter, shared by page retries and broker retries."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_EXPONENT: Final = 62
"""Backoff doubles at most this many times (a bound far past any sane cap, against overflow)."""


def backoff_s(
    attempt: int, *, base_s: float, max_s: float, rand: Callable[[], float] = random.random
) -> float:
    """Full jitter: uniform in [0, min(max_s, base_s * 2**attempt)]; `attempt` counts from 0."""
    ceiling = min(max_s, base_s * 2.0 ** min(attempt, MAX_EXPONENT))
    return ceiling * rand()
