"""Which progress records are handled, per partition, and how far it is safe to commit: a
partition's position is its lowest record still waiting for a delivery (or one past the
highest record read, when none is): at least once, although receivers finish out of order.
Pure."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class PartitionLedger:
    """One partition's records read and not yet delivered or given up."""

    pending: set[int] = field(default_factory=set)
    next_offset: int | None = None
    committed: int | None = None

    def take(self, offset: int) -> None:
        self.pending.add(offset)
        self.next_offset = max(self.next_offset or 0, offset + 1)

    def done(self, offset: int) -> None:
        self.pending.discard(offset)

    def position(self) -> int | None:
        """The offset to commit: everything below it is delivered or given up."""
        return min(self.pending) if self.pending else self.next_offset

    def due(self) -> int | None:
        """The position when it moved since the last commit; None otherwise."""
        position = self.position()
        return None if position is None or position == self.committed else position
