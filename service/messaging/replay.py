"""`crawlstream dead-letter replay`: put chosen dead letters back on the requests topic."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Final

from aiokafka import AIOKafkaConsumer, TopicPartition

from service.logs import get_logger
from service.messaging.dead_letter import DEAD_LETTER_HEADERS, REDACTED, TRUNCATED
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.publisher import Publisher
from service.messaging.reader import PartitionSpan

if TYPE_CHECKING:
    from aiokafka import ConsumerRecord

    from service.settings import Settings

log = get_logger(__name__)

POLL_TIMEOUT_MS: Final = 1000


async def replay_dead_letters(
    settings: Settings,
    *,
    partition: int | None = None,
    from_offset: int = 0,
    to_offset: int | None = None,
    request_id: str | None = None,
) -> int:
    """Re-publish dead letters (original key, value and headers); returns how many."""
    consumer = AIOKafkaConsumer(**client_options(settings), enable_auto_commit=False)
    timeout_s = settings.kafka_timeout.total_seconds()
    await asyncio.wait_for(consumer.start(), timeout_s)
    try:
        numbers = await partitions_of(settings, settings.dead_letter_topic)
        partitions = [
            TopicPartition(settings.dead_letter_topic, n)
            for n in sorted(numbers)
            if partition is None or n == partition
        ]
        span = await PartitionSpan.seek(
            consumer, partitions, from_offset=from_offset, to_offset=to_offset
        )
        async with Publisher(settings) as publisher:
            count = 0
            async for record in span.records(poll_timeout_ms=POLL_TIMEOUT_MS):
                if _is_cut(record):
                    log.warning("replay.skipped_cut", partition=record.partition,
                                offset=record.offset)  # fmt: skip
                    continue
                if _is_redacted(record):
                    log.warning("replay.skipped_redacted", partition=record.partition,
                                offset=record.offset)  # fmt: skip
                    continue
                if request_id is None or _request_id_of(record) == request_id:
                    headers = [(k, v) for k, v in record.headers if k not in DEAD_LETTER_HEADERS]
                    await publisher.send_and_wait(
                        settings.requests_topic, record.key, record.value or b"", headers
                    )
                    count += 1
            return count
    finally:
        await asyncio.wait_for(consumer.stop(), timeout_s)


def _is_cut(record: ConsumerRecord[bytes, bytes]) -> bool:
    """A dead letter whose original was cut to fit: replaying a prefix would be garbage."""
    return any(name == TRUNCATED for name, _ in record.headers)


def _is_redacted(record: ConsumerRecord[bytes, bytes]) -> bool:
    """A dead letter whose credentials were redacted: the producer sends it again."""
    return any(name == REDACTED for name, _ in record.headers)


def _request_id_of(record: ConsumerRecord[bytes, bytes]) -> str | None:
    if record.key is not None:
        key: bytes = record.key
        return key.decode(errors="replace")
    try:
        document = json.loads(record.value or b"")
    except ValueError:
        return None
    found = document.get("request_id") if isinstance(document, dict) else None
    return found if isinstance(found, str) else None
