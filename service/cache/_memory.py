"""An in-memory `CacheStore`, for tests of the cache's logic without a broker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.cache.store import PackedPage

if TYPE_CHECKING:
    from service.cache.records import CacheIndexRecord, StoredPage


class MemoryCacheStore:
    """Entries by partition and key; bodies by partition and offset, as the topics hold them."""

    def __init__(self, *, max_body_chars: int | None = None) -> None:
        self.entries: dict[int, dict[str, CacheIndexRecord]] = {}
        self.bodies: dict[int, list[StoredPage]] = {}
        self._max_body_chars = max_body_chars

    async def find(self, partition: int, key: str) -> CacheIndexRecord | None:
        return self.entries.get(partition, {}).get(key)

    async def body(self, partition: int, entry: CacheIndexRecord) -> StoredPage | None:
        bodies = self.bodies.get(partition, [])
        return bodies[entry.body_offset] if entry.body_offset < len(bodies) else None

    def pack(self, page: StoredPage) -> PackedPage | None:
        if self._max_body_chars is not None and len(page.html) > self._max_body_chars:
            return None
        return PackedPage(page, b"")

    async def put(self, partition: int, packed: PackedPage, entry: CacheIndexRecord) -> bool:
        bodies = self.bodies.setdefault(partition, [])
        bodies.append(packed.page)
        offset = len(bodies) - 1
        await self.refresh(partition, entry.model_copy(update={"body_offset": offset}))
        return True

    async def refresh(self, partition: int, entry: CacheIndexRecord) -> None:
        self.entries.setdefault(partition, {})[entry.key] = entry
