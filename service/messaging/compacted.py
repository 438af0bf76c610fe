"""What a fetcher keeps of a compacted topic co-partitioned with its pages: the newest slot
of each key per partition it looked up (`KeyIndex`), and a record read by its offset
(`OffsetReader`). The page cache and the change histories are both kept this way.

Compaction never moves offsets and always keeps a key's newest record, so a slot may point
at the offset of the record it was read from.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition

from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options

if TYPE_CHECKING:
    from collections.abc import Callable

    from aiokafka import ConsumerRecord

    from service.settings import Settings

CATCH_UP_S: Final = 1.0
"""How stale a fetcher's copy of a partition may be: a lookup at most this long after the
last one reads what other fetchers wrote since (a former owner of the partition, or this
one's other lookups)."""

POLL_TIMEOUT_MS: Final = 200
"""How long one fetch of records waits."""

SlotT = TypeVar("SlotT")


def _consumer(
    settings: Settings,
    fetch_bytes: int | None,
    client: Callable[..., AIOKafkaConsumer] = AIOKafkaConsumer,
) -> AIOKafkaConsumer:
    sizes = {} if fetch_bytes is None else {
        "max_partition_fetch_bytes": fetch_bytes,
        "fetch_max_bytes": fetch_bytes,
    }  # fmt: skip
    # "earliest": once retention has deleted a partition's first records, a seek to offset 0
    # is out of range and must land on the oldest record kept, not the end
    return client(
        **client_options(settings),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **sizes,
    )


class KeyIndex(Generic[SlotT]):
    """Per partition looked up, the newest slot of each key of `topic`. `parse` makes a
    record's (raw key, slot); a slot of None is a tombstone (the key goes); None skips
    a record it cannot read (it logs why)."""

    def __init__(
        self,
        settings: Settings,
        topic: str,
        parse: Callable[[int, ConsumerRecord[bytes, bytes]], tuple[bytes, SlotT | None] | None],
        *,
        fetch_bytes: int | None = None,
        client: Callable[..., AIOKafkaConsumer] = AIOKafkaConsumer,
    ) -> None:
        """`client` makes the Kafka consumer from its options (a test's stands in)."""
        self._topic = topic
        self._parse = parse
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._consumer = _consumer(settings, fetch_bytes, client)
        self._slots: dict[int, dict[bytes, SlotT]] = {}
        self._positions: dict[int, int] = {}
        self._caught_up: dict[int, float] = {}
        self._lock = asyncio.Lock()

    @property
    def size(self) -> int:
        """Slots held, over every partition read."""
        return sum(map(len, self._slots.values()))

    async def start(self) -> None:
        async with asyncio.timeout(self._timeout_s):
            await self._consumer.start()

    async def stop(self) -> None:
        await stop_consumer(self._consumer, self._timeout_s)

    def get(self, partition: int, key: bytes) -> SlotT | None:
        return self._slots.get(partition, {}).get(key)

    def put(self, partition: int, key: bytes, slot: SlotT) -> None:
        """What this fetcher just wrote, known before the topic is read again."""
        self._slots.setdefault(partition, {})[key] = slot

    async def catch_up(self, partition: int) -> None:
        """Read what the partition got since the last look (all of it the first time)."""
        if self._fresh(partition):
            return
        tp = TopicPartition(self._topic, partition)
        async with self._lock:
            if self._fresh(partition):  # another lookup read it while this one waited
                return
            if partition not in self._positions:
                self._follow(partition)
            async with asyncio.timeout(self._timeout_s):
                end = (await self._consumer.end_offsets([tp]))[tp]
            while await self._consumer.position(tp) < end:
                # A deadline per fetch, not for the whole read: a large partition taken
                # over is read for as long as its records keep coming.
                async with asyncio.timeout(self._timeout_s):
                    batch = await self._consumer.getmany(tp, timeout_ms=POLL_TIMEOUT_MS)
                for record in batch.get(tp, []):
                    self._apply(partition, record)
                self._positions[partition] = await self._consumer.position(tp)
            self._caught_up[partition] = time.monotonic()

    def _fresh(self, partition: int) -> bool:
        return time.monotonic() - self._caught_up.get(partition, -CATCH_UP_S) < CATCH_UP_S

    def _follow(self, partition: int) -> None:
        """Add `partition` to the consumer, keeping the others' positions."""
        self._positions[partition] = 0
        self._slots.setdefault(partition, {})
        tps = {TopicPartition(self._topic, p): at for p, at in self._positions.items()}
        self._consumer.assign(list(tps))
        for tp, at in tps.items():
            self._consumer.seek(tp, at)

    def _apply(self, partition: int, record: ConsumerRecord[bytes, bytes]) -> None:
        parsed = self._parse(partition, record)
        if parsed is None:
            return
        key, slot = parsed
        if slot is None:
            self._slots[partition].pop(key, None)
        else:
            self._slots[partition][key] = slot


class OffsetReader:
    """Reads one record of `topic` by its partition and offset."""

    def __init__(self, settings: Settings, topic: str, *, fetch_bytes: int | None = None) -> None:
        self._topic = topic
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._consumer = _consumer(settings, fetch_bytes)
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        async with asyncio.timeout(self._timeout_s):
            await self._consumer.start()

    async def stop(self) -> None:
        await stop_consumer(self._consumer, self._timeout_s)

    async def read(self, partition: int, offset: int) -> ConsumerRecord[bytes, bytes] | None:
        """The first record at or after `offset` (the caller checks it is the one at
        `offset`: compaction may have removed that one); None when the partition ends
        before it (the topic was recreated or cut back)."""
        tp = TopicPartition(self._topic, partition)
        async with self._lock, asyncio.timeout(self._timeout_s):
            self._consumer.assign([tp])
            end = (await self._consumer.end_offsets([tp]))[tp]
            if offset >= end:
                return None
            self._consumer.seek(tp, offset)
            while True:
                batch = await self._consumer.getmany(tp, timeout_ms=POLL_TIMEOUT_MS, max_records=1)
                for record in batch.get(tp, []):
                    return record
