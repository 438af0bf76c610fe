"""Reads one deep crawl's records back from the frontier topic (the owner writes them
through its run's outbox, so they wait for partition ownership and are re-sent like results).

Every record of a job is keyed by its request_id, so they all sit on one partition, after the
request record was produced: the reader seeks that partition to the request record's
timestamp (less `CLOCK_SKEW_MS`, the producers' clocks may differ) and reads to its end as of
the start of the read. A record written as chunks (larger than one message) is joined
before it is read; the chunks of a record whose writer died before its last chunk are
dropped, as if the record had never been written (the page is rendered again, the sitemap
read again).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from pydantic import ValidationError

from service.backoff import backoff_s
from service.contracts import FrontierRecord
from service.errors import BrokerUnavailableError
from service.logs import get_logger
from service.messaging.chunks import Reassembler
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.reader import PartitionSpan
from service.messaging.seal import Seal
from service.messaging.topics import partition_for

if TYPE_CHECKING:
    from service.contracts import RecordSource
    from service.messaging.chunks import Headers
    from service.settings import Settings

log = get_logger(__name__)

CLOCK_SKEW_MS: Final = 3_600_000
"""How far before the request record's timestamp the read starts (producers' clocks)."""

FETCH_TIMEOUT_MS: Final = 500

READ_ATTEMPTS: Final = 10
RETRY_BASE_S: Final = 1.0
RETRY_MAX_S: Final = 30.0


async def read_job(
    settings: Settings,
    request_id: str,
    source: RecordSource,
    *,
    since_ms: int,
    until: int | None = None,
) -> list[FrontierRecord]:
    """The frontier records of the job answering `source`, in the order they were written.

    Broker trouble is retried `READ_ATTEMPTS` times with backoff (about 4 minutes in all);
    then the last error is raised and the run fails.
    """
    for attempt in range(READ_ATTEMPTS):
        try:
            return await _read(settings, request_id, source, since_ms=since_ms, until=until)
        except (KafkaError, TimeoutError, BrokerUnavailableError) as exc:
            if attempt + 1 == READ_ATTEMPTS:
                raise
            wait_s = backoff_s(attempt, base_s=RETRY_BASE_S, max_s=RETRY_MAX_S)
            log.warning("frontier.read_failed", error=repr(exc), attempt=attempt, wait_s=wait_s)
            await asyncio.sleep(wait_s)
    raise AssertionError("unreachable")  # pragma: no cover


async def _read(
    settings: Settings,
    request_id: str,
    source: RecordSource,
    *,
    since_ms: int,
    until: int | None,
) -> list[FrontierRecord]:
    topic = settings.frontier_topic
    partitions = await partitions_of(settings, topic)
    tp = TopicPartition(topic, partition_for(request_id, len(partitions)))
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, enable_auto_commit=False)
    records: list[FrontierRecord] = []
    chunks = Reassembler()
    seal = Seal.from_settings(settings)
    key = request_id.encode()
    async with asyncio.timeout(settings.kafka_timeout.total_seconds()):
        await consumer.start()
        try:
            since = max(since_ms - CLOCK_SKEW_MS, 0)
            to_offset = None if until is None else until - 1  # `until` is one past the last
            span = await PartitionSpan.seek(consumer, [tp], since_ms=since, to_offset=to_offset)
            async for record in span.records(poll_timeout_ms=FETCH_TIMEOUT_MS):
                if record.key == key:
                    headers = list(record.headers)
                    value = _joined(chunks, record.value, headers)
                    if value is not None and seal.admits(topic, key, value, headers):
                        _keep(records, value, source)
        finally:
            await consumer.stop()
    log.info(
        "frontier.replayed",
        records=len(records),
        partition=tp.partition,
        incomplete=chunks.pending,
    )
    return records


def _joined(chunks: Reassembler, value: bytes | None, headers: Headers) -> bytes | None:
    """The whole record once its last chunk is read (a record that is not chunked as it
    is); None while chunks are missing, or for chunks that do not add up."""
    if value is None:
        return None
    try:
        return chunks.add(value, headers)
    except ValueError as exc:  # ChunkError, or headers that are not ours: not a record
        log.warning("frontier.unreadable", error=str(exc)[:200])
        return None


def _keep(records: list[FrontierRecord], value: bytes | None, source: RecordSource) -> None:
    if value is None:
        return
    try:
        record = FrontierRecord.model_validate_json(value)
    except ValidationError as exc:  # not ours to judge: a newer worker's record, or garbage
        log.warning("frontier.unreadable", error=str(exc)[:200])
        return
    if record.source == source:
        records.append(record)
