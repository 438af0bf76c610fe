"""Waiting for a condition: polled on the event loop, under a deadline."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

UNIT_DEADLINE_S: Final = 5.0
"""Ample for in-memory work that takes milliseconds: a unit test that waits longer is stuck."""


async def until(
    condition: Callable[[], object], deadline_s: float = UNIT_DEADLINE_S, every_s: float = 0
) -> None:
    """Return once `condition()` is true; fail with TimeoutError past `deadline_s`. A unit
    test polls at every turn of the loop; a test waiting on processes polls `every_s`."""
    async with asyncio.timeout(deadline_s):
        while not condition():
            await asyncio.sleep(every_s)
