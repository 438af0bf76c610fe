"""Finds the result of a page event in the results topic, for the document of its `page`
webhook."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import TYPE_CHECKING, Final

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from pydantic import ValidationError

from service.contracts import PageResult
from service.messaging.chunks import Reassembler
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.reader import PartitionSpan

if TYPE_CHECKING:
    from service.contracts import ProgressEvent
    from service.gateway.jobs import JobMarker
    from service.settings import Settings

log = structlog.get_logger(__name__)

POLL_TIMEOUT_MS: Final = 500

RESULT_LOOKBACK: Final = timedelta(minutes=5)
"""How far before a page event the search for its result starts, for requests produced
without the gateway (whose marker names where the job's results begin)."""


class Results:
    """Finds a page event's result in the results topic, reading each job's partition
    forward from where the last lookup of that job stopped."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._consumer = AIOKafkaConsumer(
            **client_options(settings), enable_auto_commit=False, group_id=None
        )
        self._lock = asyncio.Lock()
        self._positions: dict[str, int] = {}
        self._found: dict[str, dict[str, PageResult]] = {}
        self._taken: dict[str, set[str]] = {}
        """Each job's result ids already found: a page event repeated after a worker's death
        (at least once) names a result read before, which the job's next records do not hold."""
        self._chunks: dict[str, Reassembler] = {}
        self._partitions: list[int] = []

    async def start(self) -> None:
        await self._consumer.start()
        topic = self._settings.results_topic
        self._partitions = sorted(await partitions_of(self._settings, topic))

    async def stop(self) -> None:
        await stop_consumer(self._consumer, self._settings.kafka_timeout.total_seconds())

    @property
    def partitions(self) -> list[int]:
        """The results topic's partitions (read at start)."""
        return self._partitions

    def forget(self, job_id: str) -> None:
        self._positions.pop(job_id, None)
        self._found.pop(job_id, None)
        self._taken.pop(job_id, None)
        self._chunks.pop(job_id, None)

    async def find(
        self, event: ProgressEvent, marker: JobMarker | None, *, start: int | None = None
    ) -> PageResult:
        """The result of a page event; TimeoutError when it cannot be read in time."""
        async with asyncio.timeout(self._settings.kafka_timeout.total_seconds()):
            found = self._found.setdefault(event.request_id, {})
            taken = self._taken.setdefault(event.request_id, set())
            result_id = str(event.result_id)
            tp = self._partition(event.request_id, marker)
            again = result_id in taken and result_id not in found
            if again or event.request_id not in self._positions:
                # a repeated event reads the job's results again from where they begin
                async with self._lock:
                    self._positions[event.request_id] = (
                        start if start is not None else await self._start(tp, event, marker)
                    )
            while result_id not in found:
                # the lock is held one read at a time: a long search of one job (a result
                # that never comes) lets the other receivers' lookups take turns with it
                async with self._lock:
                    await self._read(tp, event.request_id, found, result_id, taken)
            taken.add(result_id)
            return found.pop(result_id)

    async def scan(self, job_id: str, start: int) -> list[PageResult]:
        """Every result of `job_id` from `start` to its partition's end now (a check's
        summary); TimeoutError when they cannot be read in time."""
        tp = self._partition(job_id, None)
        chunks, results = Reassembler(), []
        async with asyncio.timeout(self._settings.kafka_timeout.total_seconds()), self._lock:
            span = await PartitionSpan.seek(self._consumer, [tp], from_offset=start)
            async for record in span.records(key=job_id.encode()):
                with contextlib.suppress(ValidationError, ValueError):
                    whole = chunks.add(record.value, list(record.headers))
                    if whole is not None:
                        results.append(PageResult.model_validate_json(whole))
        return results

    def _partition(self, job_id: str, marker: JobMarker | None) -> TopicPartition:
        topic = self._settings.results_topic
        if marker is not None:
            return TopicPartition(topic, marker.results_partition)
        chosen: int = DefaultPartitioner()(job_id.encode(), self._partitions, [])
        return TopicPartition(topic, chosen)

    async def _start(
        self, tp: TopicPartition, event: ProgressEvent, marker: JobMarker | None
    ) -> int:
        if marker is not None:
            return marker.results_offset
        self._consumer.assign([tp])
        since = int((event.at - RESULT_LOOKBACK).timestamp() * 1000)
        found = await self._consumer.offsets_for_times({tp: max(since, 0)})
        hit = found.get(tp)
        return int(hit.offset) if hit is not None else 0

    async def _read(
        self,
        tp: TopicPartition,
        job_id: str,
        found: dict[str, PageResult],
        wanted: str,
        taken: set[str],
    ) -> None:
        """The next records of the job's partition: its results to `found`, but for those
        already taken (other than `wanted`)."""
        self._consumer.assign([tp])
        self._consumer.seek(tp, self._positions[job_id])
        batch = await self._consumer.getmany(tp, timeout_ms=POLL_TIMEOUT_MS)
        chunks = self._chunks.setdefault(job_id, Reassembler())
        key = job_id.encode()
        for record in batch.get(tp, []):
            self._positions[job_id] = record.offset + 1
            if record.key != key:
                continue
            try:
                whole = chunks.add(record.value, list(record.headers))
                result = None if whole is None else PageResult.model_validate_json(whole)
            except (ValidationError, ValueError):
                log.warning("webhooks.result_invalid", partition=tp.partition, offset=record.offset)
                continue
            if result is not None and (result.result_id == wanted or result.result_id not in taken):
                found[result.result_id] = result
