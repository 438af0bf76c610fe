"""Reads the whole control topic, from the beginning and all the time, into a registry.

A group-less consumer of its own: it runs whatever the requests consumer does (paused for
memory, rebalancing, draining), so a cancel reaches a running request within a poll.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from service.control.records import ControlRecords
from service.errors import BrokerUnavailableError
from service.logs import get_logger
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.polling import PollLoop, Waiters

if TYPE_CHECKING:
    from types import TracebackType

    from service.control.registry import Cancel, CancelRegistry
    from service.metrics import Metrics
    from service.settings import Settings

log = get_logger(__name__)

PRUNE_INTERVAL_S: Final = 60.0
"""How often cancels past retention are forgotten."""

LOOP_RETRY_S: Final = 1.0
"""Pause after an unexpected error of a poll before the next one (a bug must not spin)."""


class ControlReader:
    """Feeds every control record to the registry; an async context manager that returns
    once the topic has been read up to its end as of start.

    A record that cannot be parsed or applied, for whatever reason, is skipped: counted in
    `crawl_control_records_skipped_total{reason}`, logged once at warning, never fatal."""

    def __init__(self, settings: Settings, registry: CancelRegistry, metrics: Metrics) -> None:
        self._settings = settings
        self._registry = registry
        self._records = ControlRecords(registry, metrics.control_records_skipped)
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._consumer = AIOKafkaConsumer(
            **client_options(settings),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",  # no group, no committed offset: from the beginning
        )
        self._offsets = AIOKafkaConsumer(**client_options(settings), group_id=None)
        """Asks for end offsets only. The reading consumer's connection is busy with a long
        poll (the broker answers one request per connection at a time), so an end-offsets
        request sent on it waits up to `fetch_max_wait_ms` (measured: ~300 ms of a 1-URL
        request's latency went here)."""
        self._partitions: list[TopicPartition] = []
        self._reading = PollLoop(self._poll, name="control", retry_s=LOOP_RETRY_S)
        self._next_prune = 0.0
        self._positions: dict[TopicPartition, int] = {}
        self._progress = asyncio.Condition()
        """Notified after each poll, with `_positions` updated."""
        self._waiters = Waiters()

    async def __aenter__(self) -> Self:
        try:
            await asyncio.wait_for(self._consumer.start(), self._timeout_s)
            await asyncio.wait_for(self._offsets.start(), self._timeout_s)
            self._partitions = await self._assign()
        except (KafkaError, TimeoutError, OSError) as exc:
            await self._consumer.stop()
            await self._offsets.stop()
            raise BrokerUnavailableError(f"cannot read the control topic: {exc}") from exc
        self._next_prune = asyncio.get_running_loop().time() + PRUNE_INTERVAL_S
        self._reading.start()
        await self.sync(self._timeout_s)
        self._records.started()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._reading.stop()
        await stop_consumer(self._consumer, self._timeout_s)
        await stop_consumer(self._offsets, self._timeout_s)

    def known_cancel(self, request_id: str) -> Cancel | None:
        """The request's cancel as read so far, without waiting for the topic's end: a run
        or page is registered with the worker's active runs before it asks, so a cancel
        read later reaches it live."""
        return self._registry.lookup(request_id)

    async def sync(self, deadline_s: float) -> None:
        """Wait until everything produced to the control topic before this call was read."""
        with self._waiters.waiting():
            await self._synced(deadline_s)

    async def _synced(self, deadline_s: float) -> None:
        async with asyncio.timeout(deadline_s):
            ends = await self._offsets.end_offsets(self._partitions)
            async with self._progress:
                await self._progress.wait_for(
                    lambda: all(self._positions.get(tp, -1) >= end for tp, end in ends.items())
                )

    async def _assign(self) -> list[TopicPartition]:
        topic = self._settings.control_topic
        found = await partitions_of(self._settings, topic)
        partitions = [TopicPartition(topic, p) for p in sorted(found)]
        self._consumer.assign(partitions)
        return partitions

    async def _poll(self) -> None:
        """Read one batch, take each record, note the positions; now and then forget the
        cancels no run can be waiting for any more."""
        batch = await self._consumer.getmany(timeout_ms=self._waiters.poll_ms)
        for records in batch.values():
            for record in records:
                self._records.take(record)
        await self._advanced()
        now = asyncio.get_running_loop().time()
        if now >= self._next_prune:
            self._registry.prune()
            self._next_prune = now + PRUNE_INTERVAL_S

    async def _advanced(self) -> None:
        """Note where each partition is read to, and wake callers of `sync`."""
        for tp in self._partitions:
            self._positions[tp] = await self._consumer.position(tp)
        async with self._progress:
            self._progress.notify_all()
