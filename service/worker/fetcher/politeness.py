"""Politeness per host on its fetcher (which owns the host for the whole group): a run's
`delay_ms` between its pages' starts, and the whole host's wait after it asked for one."""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


class HostPacer:
    """Spaces the starts of one run's pages of a host by its `delay_ms`: a page's turn comes
    `delay_s` after the previous page of the run and host started (was given its slot), and
    the next page asks for its turn only once that one has started or given up. A page that
    waited for a slot after its turn therefore pushes the next one back; turns never pile
    up while pages wait for slots, so pages never start in a burst."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lanes: dict[tuple[str, str], _Lane] = {}

    async def turn(self, run_id: str, host: str, delay_s: float) -> PaceTurn:
        """Return when a page of `host` may start: `delay_s` after the previous page's start.
        The caller calls `started()` on the turn when the page starts, or `give_up()` if it
        ends before starting (both are what lets the next page ask)."""
        if delay_s <= 0:
            return PaceTurn()
        now = self._clock()
        self._lanes = {
            key: lane
            for key, lane in self._lanes.items()
            if lane.users or lane.started_at + lane.delay_s > now
        }
        lane = self._lanes.setdefault((run_id, host), _Lane())
        lane.delay_s = delay_s
        lane.users += 1
        try:
            await lane.baton.acquire()
        except BaseException:
            lane.users -= 1
            raise
        turn = PaceTurn(lane, self._clock)
        try:
            wait_s = lane.started_at + delay_s - self._clock()
            if wait_s > 0:
                await self._sleep(wait_s)
        except BaseException:
            turn.give_up()
            raise
        return turn


class _Lane:
    """One run's pages of one host: who may ask for a turn, and when the last one started."""

    def __init__(self) -> None:
        self.baton = asyncio.Lock()
        self.started_at = -math.inf
        self.delay_s = 0.0
        self.users = 0


class PaceTurn:
    """A page's turn, held from its turn until it starts (or gives up)."""

    def __init__(
        self, lane: _Lane | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._lane = lane
        self._clock = clock

    def started(self) -> None:
        """The page starts now: the next page's turn comes `delay_s` from now."""
        if self._lane is not None:
            self._lane.started_at = self._clock()
        self.give_up()

    def give_up(self) -> None:
        """Let the next page ask (once; a no-op after `started`)."""
        lane, self._lane = self._lane, None
        if lane is not None:
            lane.users -= 1
            lane.baton.release()


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
