"""Contexts wiped after their request, waiting for the next request that has none.

A request without a `session` gets a context no other request is using. Making a new one costs
Chromium a renderer process per page (~140 CPU-ms each on this machine's cores, most of what a
context per request cost); so when a request ends, its context is wiped (`RequestContext.wipe`:
pages at about:blank with their history and `window.name` reset; cookies, permissions, the HTTP
cache and every origin's storage cleared) and kept here for the next one, whose pages then
reuse the renderers. A wiped context waits at most `idle_s`, at most `capacity` wait at once,
and one is closed instead of wiped once it has served its share of requests.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from service.browser.sessions import Shareable

if TYPE_CHECKING:
    from collections.abc import Callable

C = TypeVar("C", bound=Shareable)


@dataclass(slots=True, eq=False)
class _Waiting(Generic[C]):
    key: str
    context: C
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True, eq=False)
class WipedContexts(Generic[C]):
    """Wiped contexts by reuse key (contexts differ in what the whole context blocks)."""

    capacity: int
    idle_s: float
    close: Callable[[C], None]
    """Closes a context that will not be handed out (in the background)."""
    _waiting: list[_Waiting[C]] = field(default_factory=list)
    """Oldest first."""

    def put(self, key: str, context: C) -> None:
        """`context` is wiped and may go to the next request with `key`."""
        if self.capacity <= 0:
            self.close(context)
            return
        while len(self._waiting) >= self.capacity:
            self._end(self._waiting[0])
        waiting: _Waiting[C] = _Waiting(key=key, context=context)
        waiting.timer = asyncio.get_running_loop().call_later(self.idle_s, self._end, waiting)
        self._waiting.append(waiting)

    def take(self, key: str) -> C | None:
        """The most recently wiped usable context for `key`, removed from here; None if none."""
        for waiting in reversed(self._waiting):
            if waiting.key != key:
                continue
            self._waiting.remove(waiting)
            if waiting.timer is not None:
                waiting.timer.cancel()
            if waiting.context.usable:
                return waiting.context
            self.close(waiting.context)
        return None

    def clear(self) -> None:
        """Close every waiting context now (memory is short, or the browser is replaced)."""
        for waiting in list(self._waiting):
            self._end(waiting)

    @property
    def ready(self) -> int:
        return len(self._waiting)

    def _end(self, waiting: _Waiting[C]) -> None:
        if waiting in self._waiting:
            self._waiting.remove(waiting)
            if waiting.timer is not None:
                waiting.timer.cancel()
            self.close(waiting.context)
