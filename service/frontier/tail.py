"""Follows the frontier partitions of the requests partitions a coordinator owns.

The frontier topic is keyed by request_id and has as many partitions as the requests
topic, so the records of every run a coordinator holds sit on the frontier partitions with
the numbers of its requests partitions. When the coordinator's assignment changes, the tail
starts each new partition at its end; a run subscribes before it dispatches a page, and
gets every record of its request written after that: the fetchers' page outcomes. What
was written before (by an earlier run of the request) the run reads with `read_job` up to
the position `subscribe` returns, so nothing falls between the two.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from service.contracts import FrontierRecord
from service.logs import get_logger
from service.messaging.chunks import Reassembler
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.polling import PollLoop, records_or_wake
from service.messaging.seal import Seal
from service.messaging.topics import partition_for

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from aiokafka import ConsumerRecord

    from service.settings import Settings

log = get_logger(__name__)

RETRY_S: Final = 1.0
"""Pause after a failed poll or end-offset lookup before trying again."""


class FrontierTail:
    """One group-less consumer of the owned frontier partitions; records go to their runs."""

    def __init__(self, settings: Settings, seal: Seal | None = None) -> None:
        self._settings = settings
        self._seal = seal or Seal.from_settings(settings)
        """Only this deployment's authentic records reach a run."""
        self._topic = settings.frontier_topic
        self._partitions = settings.requests_partitions
        """Frontier partition count (checked equal to the requests topic's at start)."""
        self._consumer = AIOKafkaConsumer(
            **client_options(settings),
            group_id=None,
            enable_auto_commit=False,
            max_partition_fetch_bytes=int(settings.max_message_bytes) + 65_536,
        )
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._subscribers: dict[str, list[Callable[[FrontierRecord], None]]] = {}
        self._positions: dict[int, int] = {}
        """Owned partition -> the offset of the next record the tail hands out."""
        self._chunks: dict[int, Reassembler] = {}
        self._wanted: set[int] = set()
        self._changed = asyncio.Event()
        self._applied = asyncio.Event()
        self._reading = PollLoop(self._poll, name="frontier", retry_s=RETRY_S)

    def set_partitions(self, count: int) -> None:
        """The frontier topic's partition count, as found at start."""
        self._partitions = count

    async def __aenter__(self) -> Self:
        await asyncio.wait_for(self._consumer.start(), self._timeout_s)
        self._reading.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._reading.stop()
        await stop_consumer(self._consumer, self._timeout_s)

    def partition_of(self, request_id: str) -> int:
        return partition_for(request_id, self._partitions)

    async def follow(self, partitions: set[int]) -> None:
        """Follow exactly `partitions` (the requests partitions now owned); return once the
        new ones are positioned at their end, so runs of them can subscribe."""
        self._wanted = set(partitions)
        self._applied.clear()
        self._changed.set()
        await asyncio.wait_for(self._applied.wait(), self._timeout_s)

    async def subscribe(self, request_id: str, deliver: Callable[[FrontierRecord], None]) -> int:
        """Hand `deliver` every record of `request_id` from now on; returns the offset from
        which they come (read what lies before it with `read_job(until=...)`). A record of
        a partition whose assignment is still being applied waits for it (aiokafka may hand
        out records before the rebalance listener has returned)."""
        partition = self.partition_of(request_id)
        if partition not in self._positions:
            if partition not in self._wanted:
                self._wanted.add(partition)
                self._applied.clear()
                self._changed.set()
            async with asyncio.timeout(self._timeout_s):
                while partition not in self._positions:
                    self._applied.clear()
                    self._changed.set()
                    await self._applied.wait()
        self._subscribers.setdefault(request_id, []).append(deliver)
        return self._positions[partition]

    def offer(self, record: FrontierRecord) -> None:
        """A record this process wrote and the broker acknowledged (a page its own fetcher
        finished): hand it to its runs now instead of after a round trip through Kafka.
        The copy read from the topic later is the same record; runs take a page once."""
        for deliver in list(self._subscribers.get(record.request_id, ())):
            deliver(record)

    def unsubscribe(self, request_id: str, deliver: Callable[[FrontierRecord], None]) -> None:
        subscribers = self._subscribers.get(request_id, [])
        if deliver in subscribers:
            subscribers.remove(deliver)
        if not subscribers:
            self._subscribers.pop(request_id, None)

    async def _poll(self) -> None:
        """Apply a change of the partitions followed, then read one batch and hand it out."""
        if self._changed.is_set():
            await self._apply()
        if not self._positions:
            await self._changed.wait()
            return
        batch = await records_or_wake(self._consumer, self._changed)
        for tp, records in batch.items():
            if tp.partition in self._positions:
                for record in records:
                    self._hand_out(tp.partition, record)

    async def _apply(self) -> None:
        """Assign the wanted partitions; new ones start at their end offset. A lookup that
        fails is tried again by the poll loop (after its pause, unless it is stopping)."""
        self._changed.clear()
        wanted = set(self._wanted)
        new = [TopicPartition(self._topic, p) for p in wanted - set(self._positions)]
        try:
            ends = await self._consumer.end_offsets(new) if new else {}
        except BaseException:
            self._changed.set()  # still to apply
            raise
        for p in set(self._positions) - wanted:
            del self._positions[p]
            self._chunks.pop(p, None)
        self._consumer.assign([TopicPartition(self._topic, p) for p in sorted(wanted)])
        for tp, end in ends.items():
            self._positions[tp.partition] = end
            self._chunks[tp.partition] = Reassembler()
        for tp in self._consumer.assignment():
            self._consumer.seek(tp, self._positions[tp.partition])
        log.info("frontier.following", partitions=sorted(wanted))
        self._applied.set()

    def _hand_out(self, partition: int, record: ConsumerRecord[bytes, bytes]) -> None:
        if record.offset < self._positions[partition]:
            return  # read again after a seek
        self._positions[partition] = record.offset + 1
        key = record.key.decode(errors="replace") if record.key else ""
        subscribers = self._subscribers.get(key)
        if not subscribers or record.value is None:
            return
        headers = list(record.headers)
        try:
            value = self._chunks[partition].add(record.value, headers)
        except ValueError as exc:
            log.warning("frontier.unreadable", error=str(exc)[:200])
            return
        if value is None or not self._seal.admits(self._topic, record.key, value, headers):
            return
        try:
            parsed = FrontierRecord.model_validate_json(value)
        except ValidationError as exc:
            log.warning("frontier.unreadable", error=str(exc)[:200])
            return
        for deliver in list(subscribers):
            deliver(parsed)
