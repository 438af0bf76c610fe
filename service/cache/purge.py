"""Removing entries from the page cache: tombstones for every entry of a URL or a host.

A site owner's removal request ends here. The tombstones go to the partition of each
entry, in both cache topics: fetchers drop the entry at their next look at the partition
(`CATCH_UP_S`), and compaction deletes the stored page for good.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from pydantic import ValidationError

from service.cache.records import CacheIndexRecord
from service.frontier.urls import normalise
from service.logs import get_logger
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.reader import PartitionSpan
from service.net.hosts import host_key

if TYPE_CHECKING:
    from service.settings import Settings

log = get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Purge:
    """Which entries go: those of one URL (normalised), or of every URL of one host."""

    url: str | None = None
    host: str | None = None

    def __post_init__(self) -> None:
        if (self.url is None) == (self.host is None):
            raise ValueError("purge one URL or one host")

    def matches(self, entry_url: str) -> bool:
        if self.url is not None:
            return (normalise(entry_url) or entry_url) == (normalise(self.url) or self.url)
        return host_key(entry_url) == (self.host or "").lower()


async def purge(settings: Settings, what: Purge) -> int:
    """Tombstone every live entry `what` names; the number of entries removed."""
    live = await _live_entries(settings)
    doomed = [(p, key) for (p, key), url in live.items() if what.matches(url)]
    producer = AIOKafkaProducer(**client_options(settings), acks="all")
    timeout_s = settings.kafka_timeout.total_seconds()
    await asyncio.wait_for(producer.start(), timeout_s)
    try:
        for p, key in doomed:
            for topic in (settings.cache_index_topic, settings.cache_bodies_topic):
                sent = producer.send_and_wait(topic, None, key=key.encode(), partition=p)
                await asyncio.wait_for(sent, timeout_s)
    finally:
        await producer.stop()
    log.info("cache.purged", entries=len(doomed), url=what.url, host=what.host)
    return len(doomed)


async def _live_entries(settings: Settings) -> dict[tuple[int, str], str]:
    """(partition, key) -> URL of each entry of the index topic not yet tombstoned."""
    topic = settings.cache_index_topic
    partitions = [TopicPartition(topic, p) for p in await partitions_of(settings, topic)]
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, enable_auto_commit=False)
    live: dict[tuple[int, str], str] = {}
    async with asyncio.timeout(settings.kafka_timeout.total_seconds()):
        await consumer.start()
    try:
        span = await PartitionSpan.seek(consumer, partitions)
        async for record in span.records():
            key = (record.partition, (record.key or b"").decode(errors="replace"))
            if not record.value:
                live.pop(key, None)
                continue
            try:
                live[key] = CacheIndexRecord.model_validate_json(record.value).url
            except ValidationError:
                continue
    finally:
        await consumer.stop()
    return live
