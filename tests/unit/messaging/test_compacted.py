"""A fetcher's copy of a compacted partition (`KeyIndex`): lookups that arrive together read
the partition once, not once each."""

from __future__ import annotations

import asyncio

from aiokafka import ConsumerRecord, TopicPartition
from inmemory import FakeKafkaConsumer

from service.messaging.compacted import KeyIndex
from service.settings import Settings

SETTINGS = Settings(worker_name="unit")
TOPIC = SETTINGS.cache_index_topic
TP = TopicPartition(TOPIC, 3)


def _record(offset: int, key: bytes, value: bytes) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(TOPIC, TP.partition, offset, 0, 0, key, value, None, 0, 0, [])


def _parse(_partition: int, record: ConsumerRecord[bytes, bytes]) -> tuple[bytes, bytes]:
    return record.key or b"", record.value or b""


async def test_lookups_that_wait_for_one_catch_up_do_not_read_the_partition_again():
    fake = FakeKafkaConsumer()
    fake.log[TP] = [_record(0, b"a", b"1"), _record(1, b"b", b"2"), _record(2, b"a", b"3")]
    index = KeyIndex(SETTINGS, TOPIC, _parse, client=fake.factory)
    await index.start()

    await asyncio.gather(*(index.catch_up(TP.partition) for _ in range(8)))

    assert fake.ends_asked == [{TP}]  # eight lookups of a page slot each: one read
    assert index.get(TP.partition, b"a") == b"3"
    assert index.get(TP.partition, b"b") == b"2"
    assert fake.handed_out == [(TP, 0), (TP, 1), (TP, 2)]
