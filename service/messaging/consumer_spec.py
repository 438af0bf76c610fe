"""What a `RecordConsumer` is told: which topic and group it reads with which meters
(`ConsumerSpec`), and what it feeds its records to (`RecordHandler`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable

    from aiokafka import ConsumerRecord, TopicPartition
    from prometheus_client import Counter, Gauge

    from service.messaging.offsets import Delivery


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSpec:
    """Which topic and group a `RecordConsumer` reads, and the meters it keeps."""

    topic: str
    group_id: str
    name: str
    """In log events: `request` or `page`."""
    max_in_flight: int
    run_ahead: int
    """How far past its oldest unfinished record one partition may be read."""
    lag: Gauge
    in_flight: Gauge
    paused: Gauge
    pauses: Counter
    rebalances: Counter
    skipped: Counter
    charge_on_delivery: bool = True
    """Count a delivery against its record when it is taken (else the handler calls
    `charge`, when the part that may kill the worker begins)."""
    on_assigned: Callable[[set[TopicPartition]], Awaitable[None]] | None = None
    """Called with the whole assignment after each rebalance, before any record of it runs."""
    held: Gauge | None = None
    """Partitions not read now (full, read far enough ahead, or everything paused)."""


class RecordHandler(Protocol):
    """What a consumer feeds its records to."""

    async def handle(
        self, record: ConsumerRecord[bytes, bytes], delivery: Delivery, owned: asyncio.Event
    ) -> None:
        """Take `record` to its end; publish only while `owned` is set."""

    def full(self, partition: int) -> bool:
        """The handler has enough of `partition` taken and waiting: it is read no further
        for now, and the others are (the fetcher's per-partition queue)."""
