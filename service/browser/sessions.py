"""Contexts shared on purpose: requests naming the same `session` use one browser context.

A session's context serves every request with its key, also at the same time, and stays open
`idle_s` after its last request ended so the next one finds it (with its cookies and storage).
A request without a session never gets one of these.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable


class Shareable(Protocol):
    @property
    def usable(self) -> bool:
        """Its browser is alive and still takes new work."""
        ...


C = TypeVar("C", bound=Shareable)


@dataclass(slots=True, eq=False)
class _Entry(Generic[C]):
    key: str
    context: C
    users: int = 1
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True, eq=False)
class SharedContexts(Generic[C]):
    """Session key -> its context, with a count of the requests using it."""

    idle_s: float
    close: Callable[[C], None]
    """Closes a context no request uses any more (in the background)."""
    _by_key: dict[str, _Entry[C]] = field(default_factory=dict)
    _by_context: dict[int, _Entry[C]] = field(default_factory=dict)

    def join(self, key: str) -> C | None:
        """The session's context, now counted as used by one more request; None when the
        session has none that is usable (the caller opens one and `add`s it)."""
        entry = self._by_key.get(key)
        if entry is None:
            return None
        if not entry.context.usable:
            del self._by_key[key]
            if entry.users == 0:
                self._end(entry)
            return None
        entry.users += 1
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        return entry.context

    def add(self, key: str, context: C) -> None:
        """`context` is the session's from now on, used by the request that opened it."""
        entry = _Entry(key=key, context=context)
        self._by_key[key] = entry
        self._by_context[id(context)] = entry

    def owns(self, context: C) -> bool:
        return id(context) in self._by_context

    def leave(self, context: C) -> None:
        """A request is done with `context`: the last one out starts the idle countdown (or
        closes it at once when it is no longer the session's or cannot take work)."""
        entry = self._by_context[id(context)]
        entry.users -= 1
        if entry.users > 0:
            return
        if self._by_key.get(entry.key) is not entry or not context.usable:
            self._end(entry)
            return
        loop = asyncio.get_running_loop()
        entry.timer = loop.call_later(self.idle_s, self._expire, entry)

    def close_idle(self) -> None:
        """Close every session context no request is using (memory is short)."""
        for entry in [e for e in self._by_context.values() if e.users == 0]:
            self._end(entry)

    def _expire(self, entry: _Entry[C]) -> None:
        if entry.users == 0:
            self._end(entry)

    def _end(self, entry: _Entry[C]) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
        if self._by_key.get(entry.key) is entry:
            del self._by_key[entry.key]
        if self._by_context.pop(id(entry.context), None) is not None:
            self.close(entry.context)
