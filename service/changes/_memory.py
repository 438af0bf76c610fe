"""An in-memory `HistoryStore`, for tests of change tracking's logic without a broker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.changes.compare import History, Observation

if TYPE_CHECKING:
    from service.changes.history import HistoryRecord


class MemoryHistoryStore:
    """Newest records by partition and key, as the compacted topic keeps them."""

    def __init__(self) -> None:
        self.records: dict[int, dict[str, HistoryRecord]] = {}

    async def find(self, partition: int, key: str) -> History | None:
        record = self.records.get(partition, {}).get(key)
        if record is None:
            return None
        before = record.before
        return History(
            latest=Observation(fetched_at=record.fetched_at, sha256=record.sha256),
            result_id=record.result_id,
            before=(
                None
                if before is None
                else Observation(fetched_at=before.fetched_at, sha256=before.sha256)
            ),
        )

    async def markdown(self, partition: int, key: str, *, before: bool = False) -> str | None:
        record = self.records.get(partition, {}).get(key)
        if record is None:
            return None
        if before:
            return None if record.before is None else record.before.markdown
        return record.markdown

    async def put(self, partition: int, record: HistoryRecord) -> None:
        self.records.setdefault(partition, {})[record.key] = record
