"""Politeness per host on its fetcher (which owns the host for the whole group): a run's
`delay_ms` between its pages' starts, and the whole host's wait after it asked for one."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


class HostPacer:
    """Spaces the starts of one run's pages of a host by its `delay_ms`."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._next: dict[tuple[str, str], float] = {}

    async def turn(self, run_id: str, host: str, delay_s: float) -> None:
        """Return when a page of `host` may start: `delay_s` after the previous one's turn."""
        if delay_s <= 0:
            return
        now = self._clock()
        self._next = {key: at for key, at in self._next.items() if at > now - delay_s}
        start = max(now, self._next.get((run_id, host), now))
        self._next[(run_id, host)] = start + delay_s
        if start > now:
            await self._sleep(start - now)


HOST_BACKOFF_REASONS: Final = frozenset({"http_429", "http_503", "blocked_by_site"})
"""Answers that speak for the whole host ("come back later"), not for one page."""


class HostBackoff:
    """A host that answered 429, 503 or a challenge page waits, for every page of it on this
    fetcher (which owns the host for the whole group): no page of it starts before the
    wait its answer asked for (`Retry-After`, else the retry policy's) has passed."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._until: dict[str, float] = {}

    def back_off(self, host: str, wait_s: float) -> None:
        """`host` asked to be left alone for `wait_s` (a later answer may extend it)."""
        until = self._clock() + wait_s
        if until > self._until.get(host, 0.0):
            self._until[host] = until

    def waiting_s(self, host: str) -> float:
        """How long a page of `host` must still wait (0: it may start)."""
        until = self._until.get(host)
        if until is None:
            return 0.0
        left = until - self._clock()
        if left <= 0:
            del self._until[host]
            return 0.0
        return left

    async def turn(self, host: str) -> None:
        """Return once `host`'s backoff is over (it may be extended while waiting)."""
        while (left := self.waiting_s(host)) > 0:
            await self._sleep(left)
