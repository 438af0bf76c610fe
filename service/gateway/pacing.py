"""Slices of heavy work take turns on the event loop. Encoding a page of documents, parsing a
large body and decoding a fetched batch of results are cut in slices of about a millisecond;
one slice runs at a time, in the order they asked (a fair lock), so however many big pages
one tenant has in flight, another tenant's call waits behind one slice at each of its
steps, not behind one slice of every big page."""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")


class Slices:
    """The event loop's heavy work, a slice at a time (one event loop per process)."""

    def __init__(self) -> None:
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self.taken = 0
        """Slices run so far (tests check that big work went through here)."""

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` once no other slice runs; the loop serves other tasks right after it."""
        async with self._turn():
            self.taken += 1
            done = work()
        await asyncio.sleep(0)
        return done

    def _turn(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        turn = self._turns.get(loop)
        if turn is None:
            turn = self._turns[loop] = asyncio.Lock()
        return turn


SLICES: Final = Slices()
"""The process's one line of heavy slices (its event loop's)."""
