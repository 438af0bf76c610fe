"""An in-memory `HistoryStore`, for tests of change tracking's logic without a broker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.changes.compare import Observation

if TYPE_CHECKING:
    from service.changes.history import HistoryRecord


class MemoryHistoryStore:
    """Newest records by partition and key, as the compacted topic keeps them."""

    def __init__(self) -> None:
        self.records: dict[int, dict[str, HistoryRecord]] = {}

    async def find(self, partition: int, key: str) -> Observation | None:
        record = self.records.get(partition, {}).get(key)
        if record is None:
            return None
        return Observation(fetched_at=record.fetched_at, sha256=record.sha256)

    async def markdown(self, partition: int, key: str) -> str | None:
        record = self.records.get(partition, {}).get(key)
        return None if record is None else record.markdown

    async def put(self, partition: int, record: HistoryRecord) -> None:
        self.records.setdefault(partition, {})[record.key] = record
