"""A per-host limit on pages rendered at once, over every request of the worker.

Each host gets its own semaphore while someone holds or waits for it; the entry is dropped as
soon as the last holder leaves, so crawling many hosts leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from service.settings import Settings


@dataclass(slots=True, eq=False)
class _Entry:
    semaphore: asyncio.Semaphore
    users: int = field(default=0)
    """Holders plus waiters: the entry may go only when this is back to zero."""


class KeyedSemaphore:
    """At most `limit` holders per key at once; keys nobody holds or waits for take no memory."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self._limit = limit
        self._entries: dict[str, _Entry] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyedSemaphore:
        return cls(settings.max_pages_per_host)

    def __len__(self) -> int:
        """Keys held or waited for now."""
        return len(self._entries)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Wait for one of `key`'s places and keep it for the block."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(asyncio.Semaphore(self._limit))
        entry.users += 1
        try:
            async with entry.semaphore:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]


def host_key(url: str) -> str:
    """The host a URL's page counts against (its lower-case host name, any port)."""
    return (urlsplit(url).hostname or "").lower()
