"""When a failed page is tried again, and how long to wait first.

Only transient failures are retried: HTTP 429 and 503 (the server asks us to come back), a
bot challenge or block page (`blocked_by_site`, like a 429), connection failures (reset,
refused, empty response) and an upstream proxy's (`proxy_error`). A 404 or 500, a timeout,
a blocked or unresolvable target would fail the same way again. Waits use exponential
backoff with full jitter (a uniform draw between 0 and `base * 2**attempt`, capped), unless
the server said how long with `Retry-After`; either way a wait must leave time in the
page's deadline for the next attempt, or the failure is kept.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from service.backoff import backoff_s
from service.contracts import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.content.page import PageContent
    from service.settings import Settings

RETRY_STATUSES: Final = frozenset({429, 503})
"""HTTP statuses that mean "try again later"."""

MIN_ATTEMPT_S: Final = 1.0
"""Least time that must be left in a page's deadline, after the wait, to try it again."""


def retry_reason(content: PageContent) -> str | None:
    """The metric label of a transient failure, or None when trying again would not help."""
    error = content.error
    if content.ok or error is None:
        return None
    if error.code == ErrorCode.CONNECTION:
        return "connection"
    if error.code == ErrorCode.PROXY_ERROR:
        return "proxy_error"
    if error.code == ErrorCode.BLOCKED_BY_SITE:
        return "blocked_by_site"
    if error.code == ErrorCode.HTTP_ERROR and content.status_code in RETRY_STATUSES:
        return f"http_{content.status_code}"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How many times a page is tried again and how long to wait before each try."""

    retries: int
    base_s: float
    max_s: float
    rand: Callable[[], float] = field(default=random.random, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(
            retries=settings.page_retries,
            base_s=settings.retry_backoff_base.total_seconds(),
            max_s=settings.retry_backoff_max.total_seconds(),
        )

    def delay_s(
        self, attempt: int, *, retry_after_s: float | None, remaining_s: float
    ) -> float | None:
        """Seconds to wait before retry number `attempt + 1`, or None to keep the failure.

        `remaining_s` is what is left of the page's deadline. A server's `Retry-After` is
        capped by `max_s`; when even that leaves no time for another attempt, the page gives up
        rather than wait. A backoff of our own choosing is shortened to fit instead.
        """
        usable_s = remaining_s - MIN_ATTEMPT_S
        if attempt >= self.retries or usable_s < 0:
            return None
        if retry_after_s is not None:
            wait = min(max(retry_after_s, 0.0), self.max_s)
            return wait if wait <= usable_s else None
        return min(
            backoff_s(attempt, base_s=self.base_s, max_s=self.max_s, rand=self.rand), usable_s
        )


class PageDeadline:
    """A page's time over all its attempts; it starts when the first attempt starts, so time
    spent waiting for a page slot is not counted."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._seconds = seconds
        self._clock = clock
        self._end: float | None = None

    def start(self) -> None:
        """Start the clock (once; later calls do nothing)."""
        if self._end is None:
            self._end = self._clock() + self._seconds

    def remaining_s(self) -> float:
        if self._end is None:
            return self._seconds
        return max(0.0, self._end - self._clock())

    def attempt_s(self) -> float:
        """The deadline to give the attempt starting now."""
        self.start()
        return max(self.remaining_s(), MIN_ATTEMPT_S)
