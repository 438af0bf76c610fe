"""Reading partitions from a time or an offset to their end as of the start of the read."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from aiokafka import TopicPartition

from service.messaging.reader import PartitionSpan

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


@dataclass
class Record:
    partition: int
    offset: int
    timestamp: int

    @property
    def key(self) -> bytes:
        """Every third record is of job `b"x"`, the others of job `b"y"`."""
        return b"x" if self.offset % 3 == 0 else b"y"


@dataclass
class Found:
    offset: int


@dataclass
class FakeConsumer:
    """A group-less consumer over in-memory partitions (timestamps = offset * 10),
    handing out at most two records per partition and fetch."""

    logs: dict[TopicPartition, list[Record]]
    positions: dict[TopicPartition, int] = field(default_factory=dict)

    @classmethod
    def of(cls, **sizes: int) -> FakeConsumer:
        tps = {"a": A, "b": B}
        return cls(
            {
                tps[n]: [Record(tps[n].partition, o, o * 10) for o in range(k)]
                for n, k in sizes.items()
            }
        )

    def append(self, tp: TopicPartition) -> None:
        offset = len(self.logs[tp])
        self.logs[tp].append(Record(tp.partition, offset, offset * 10))

    def assign(self, partitions):
        self.positions = dict.fromkeys(partitions, 0)

    async def end_offsets(self, partitions):
        return {tp: len(self.logs[tp]) for tp in partitions}

    async def beginning_offsets(self, partitions):
        return dict.fromkeys(partitions, 0)

    async def offsets_for_times(self, times):
        return {
            tp: next((Found(r.offset) for r in self.logs[tp] if r.timestamp >= ms), None)
            for tp, ms in times.items()
        }

    def seek(self, tp, offset):
        self.positions[tp] = offset

    async def position(self, tp):
        return self.positions[tp]

    async def getmany(self, *partitions, timeout_ms):  # noqa: ARG002 (no waiting here)
        batch = {}
        for tp in partitions:
            start = self.positions[tp]
            records = self.logs[tp][start : start + 2]
            if records:
                batch[tp] = records
                self.positions[tp] = start + len(records)
        return batch


async def offsets(span: PartitionSpan) -> list[tuple[int, int]]:
    return [(record.partition, record.offset) async for record in span.records()]


async def test_a_span_reads_each_partition_from_its_beginning_to_its_end():
    consumer = FakeConsumer.of(a=5, b=0)
    span = await PartitionSpan.seek(consumer, [A, B])
    assert await offsets(span) == [(0, o) for o in range(5)]


async def test_records_written_after_the_seek_are_not_read():
    """The end is the end offset when the span was sought: the read ends."""
    consumer = FakeConsumer.of(a=3)
    span = await PartitionSpan.seek(consumer, [A])
    consumer.append(A)
    consumer.append(A)
    assert await offsets(span) == [(0, 0), (0, 1), (0, 2)]


async def test_a_span_from_a_time_starts_at_the_first_record_at_or_after_it():
    consumer = FakeConsumer.of(a=6, b=2)
    span = await PartitionSpan.seek(consumer, [A, B], since_ms=35)
    assert await offsets(span) == [(0, 4), (0, 5)]  # b has nothing at or after 35


async def test_a_span_from_an_offset_to_an_offset_reads_both_included():
    consumer = FakeConsumer.of(a=8, b=3)
    span = await PartitionSpan.seek(consumer, [A, B], from_offset=2, to_offset=4)
    assert sorted(await offsets(span)) == [(0, 2), (0, 3), (0, 4), (1, 2)]


async def test_a_span_starting_at_or_after_its_end_reads_nothing():
    consumer = FakeConsumer.of(a=3)
    assert await offsets(await PartitionSpan.seek(consumer, [A], from_offset=3)) == []
    assert await offsets(await PartitionSpan.seek(consumer, [A], from_offset=2, to_offset=1)) == []


async def test_a_time_and_an_offset_together_are_refused():
    with pytest.raises(ValueError, match="not both"):
        await PartitionSpan.seek(FakeConsumer.of(a=1), [A], since_ms=0, from_offset=0)


async def test_a_span_of_one_key_reads_that_keys_records_from_its_start_to_its_end():
    """A job's records on a shared partition (the results and progress topics): from the
    job's start, of its key only, to the end as of the seek."""
    consumer = FakeConsumer.of(a=8)
    span = await PartitionSpan.seek(consumer, [A], from_offset=1)
    consumer.append(A)  # offset 8, written after the seek
    consumer.append(A)  # offset 9, of `x`: not read
    assert [r.offset async for r in span.records(key=b"x")] == [3, 6]
