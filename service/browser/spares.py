"""Browser contexts opened ahead of need, so a request does not wait for its context and pages.

A new context and its first pages take tens of milliseconds of browser round trips (a renderer
process each); made in the background while other pages render, they leave the request's
critical path. A spare is fresh: no page of it has navigated, and it is handed to exactly one
request, then closed with that request (it never comes back here).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from playwright.async_api import Error as PlaywrightError

from service.errors import BrowserUnavailableError
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from playwright.async_api import BrowserContext, Page

log = get_logger(__name__)

SPARE_DEADLINE_S: Final = 15.0
"""How long opening a spare context and its pages may take."""


@dataclass(slots=True, eq=False)
class Spare:
    """A fresh context with its pages, opened for the browser of `generation`."""

    context: BrowserContext
    pages: list[Page]
    generation: int


@dataclass(slots=True, eq=False)
class SpareContexts:
    """Keeps up to `target` spares of the current browser, filled one at a time in the
    background by `open_one` (which opens a context and its pages, or raises)."""

    target: int
    open_one: Callable[[], Awaitable[Spare]]
    discard: Callable[[Spare], Coroutine[object, object, None]]
    """Closes a spare that will not be used (and gives its browser's count back)."""
    spawn: Callable[[Coroutine[object, object, None]], None]
    """Runs a coroutine in the background as a task its owner keeps and reaps."""
    _ready: list[Spare] = field(default_factory=list)
    _filling: asyncio.Task[None] | None = None

    def take(self, generation: int) -> Spare | None:
        """A spare of the browser of `generation`, removed from the pool; None if none."""
        while self._ready:
            spare = self._ready.pop(0)
            if spare.generation == generation and all(not p.is_closed() for p in spare.pages):
                return spare
            self._drop(spare)
        return None

    def refill(self, *, allowed: bool) -> None:
        """Start filling up to `target` in the background unless filling already (`allowed`:
        memory is comfortable and the browser takes new contexts)."""
        if not allowed or self.target == 0 or len(self._ready) >= self.target:
            return
        if self._filling is None or self._filling.done():
            self._filling = asyncio.create_task(self._fill())

    def clear(self) -> None:
        """Close every spare now (memory is short, or the browser is being replaced)."""
        ready, self._ready = self._ready, []
        for spare in ready:
            self._drop(spare)

    async def stop(self) -> None:
        task, self._filling = self._filling, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        ready, self._ready = self._ready, []
        for spare in ready:
            await self.discard(spare)

    @property
    def ready(self) -> int:
        return len(self._ready)

    async def _fill(self) -> None:
        while len(self._ready) < self.target:
            try:
                spare = await asyncio.wait_for(self.open_one(), SPARE_DEADLINE_S)
            except (PlaywrightError, TimeoutError, BrowserUnavailableError) as exc:
                log.debug("browser.spare_failed", error=str(exc))
                return
            self._ready.append(spare)

    def _drop(self, spare: Spare) -> None:
        self.spawn(self.discard(spare))
