"""Read partitions from a time or an offset to their end as of the start of the read.

The group-less readers that look back (the frontier log, dead-letter replay, the client's
status) each read a bounded span: `PartitionSpan.seek` takes the end offsets and seeks the
starts, so what is written after it is not waited for, and `records()` ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Self

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

POLL_TIMEOUT_MS: Final = 500
"""The longest one fetch waits for records before the positions are checked again."""


@dataclass(frozen=True, slots=True)
class PartitionSpan:
    """Partitions assigned to a group-less consumer and sought to their starts, with the
    offset each one's read stops before."""

    consumer: AIOKafkaConsumer
    starts: dict[TopicPartition, int]
    stops: dict[TopicPartition, int]

    @classmethod
    async def seek(
        cls,
        consumer: AIOKafkaConsumer,
        partitions: Sequence[TopicPartition],
        *,
        since_ms: int | None = None,
        from_offset: int | None = None,
        to_offset: int | None = None,
    ) -> Self:
        """Assign `partitions` to the started `consumer` and seek each to the first record at
        or after `since_ms` (a timestamp; none there: its end), else to `from_offset`, else
        to its beginning; the read stops at its end offset now, or after `to_offset`."""
        if since_ms is not None and from_offset is not None:
            raise ValueError("read from a time or from an offset, not both")
        consumer.assign(list(partitions))
        ends = dict(await consumer.end_offsets(list(partitions)))
        starts = await _starts(consumer, ends, since_ms, from_offset)
        for tp, start in starts.items():
            consumer.seek(tp, start)  # not seek_to_beginning: it races the reset
        stops = {
            tp: end if to_offset is None else min(end, to_offset + 1) for tp, end in ends.items()
        }
        return cls(consumer, starts, stops)

    async def records(
        self, *, key: bytes | None = None, poll_timeout_ms: int = POLL_TIMEOUT_MS
    ) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
        """The span's records (with `key`: only those with that key), in offset order per
        partition; ends once each is read."""
        remaining = {tp for tp, start in self.starts.items() if start < self.stops[tp]}
        while remaining:
            batch = await self.consumer.getmany(*remaining, timeout_ms=poll_timeout_ms)
            for tp, records in batch.items():
                for record in records:
                    if record.offset < self.stops[tp] and (key is None or record.key == key):
                        yield record
            for tp in list(remaining):
                if await self.consumer.position(tp) >= self.stops[tp]:
                    remaining.discard(tp)


async def _starts(
    consumer: AIOKafkaConsumer,
    ends: dict[TopicPartition, int],
    since_ms: int | None,
    from_offset: int | None,
) -> dict[TopicPartition, int]:
    if since_ms is not None:
        found = await consumer.offsets_for_times(dict.fromkeys(ends, since_ms))
        return {tp: end if found.get(tp) is None else found[tp].offset for tp, end in ends.items()}
    if from_offset is not None:
        return dict.fromkeys(ends, from_offset)
    return dict(await consumer.beginning_offsets(list(ends)))
