"""Per-partition offset tracking for requests that finish out of order (parallel consumer).

A partition's committable position is its lowest offset still in flight, or one past the
highest offset seen when nothing is in flight: everything below it is done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from aiokafka import TopicPartition


@dataclass(slots=True)
class _PartitionState:
    in_flight: set[int] = field(default_factory=set)
    next_offset: int | None = None
    committed: int | None = None

    def position(self) -> int | None:
        if self.in_flight:
            return min(self.in_flight)
        return self.next_offset


class OffsetTracker:
    """Which offsets of which partitions are taken, done, and safe to commit."""

    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, _PartitionState] = {}

    def started(self, tp: TopicPartition, offset: int) -> None:
        state = self._partitions.setdefault(tp, _PartitionState())
        state.in_flight.add(offset)
        state.next_offset = max(offset + 1, state.next_offset or 0)

    def finished(self, tp: TopicPartition, offset: int) -> None:
        state = self._partitions.get(tp)
        if state is not None:
            state.in_flight.discard(offset)

    def in_flight(self, tp: TopicPartition) -> int:
        state = self._partitions.get(tp)
        return len(state.in_flight) if state else 0

    def run_ahead(self, tp: TopicPartition) -> int:
        """How far reading has gone past the oldest unfinished offset."""
        state = self._partitions.get(tp)
        if state is None or not state.in_flight or state.next_offset is None:
            return 0
        return state.next_offset - min(state.in_flight)

    def to_commit(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Positions that moved since the last commit, for the given partitions only."""
        positions: dict[TopicPartition, int] = {}
        for tp in partitions:
            state = self._partitions.get(tp)
            position = state.position() if state else None
            if state is not None and position is not None and position != state.committed:
                positions[tp] = position
        return positions

    def committed(self, positions: dict[TopicPartition, int]) -> None:
        for tp, position in positions.items():
            self._partitions[tp].committed = position

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop revoked partitions: their unfinished work belongs to the next owner."""
        for tp in partitions:
            self._partitions.pop(tp, None)
