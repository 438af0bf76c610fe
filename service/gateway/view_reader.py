"""Feeds the job view from Kafka: the requests topic (jobs) and the progress topic (their
events), every partition from its beginning, then live. A group-less consumer: every replica
reads everything, so any replica answers for any job."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Self

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.partitioner import DefaultPartitioner

from service.backoff import backoff_s
from service.contracts import ProgressEvent
from service.errors import BrokerUnavailableError
from service.gateway.jobs import JobMarker, JobView
from service.gateway.monitor_view import MonitorView
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.polling import BRIEF_POLL_MS, Waiters

if TYPE_CHECKING:
    from aiokafka.structs import ConsumerRecord

    from service.settings import Settings

log = structlog.get_logger(__name__)

RETRY_BASE_S: Final = 0.5
RETRY_MAX_S: Final = 10.0
"""Backoff of the view's reads after a broker error."""

FETCH_MAX_BYTES: Final = 8 * 1024 * 1024
"""Bytes fetched per poll while rebuilding (requests and events are small)."""

CONTACT_EVERY_S: Final = 5.0
"""How long the reader goes without records before it asks the broker for the partitions'
ends: a fetch from a broker that is gone returns nothing rather than fail, so without the
question a replica that cannot serve would stay `live` (and `/readyz` 200)."""


class ViewReader:
    """Tails the requests and progress topics into a `JobView`; an async context manager."""

    def __init__(
        self, settings: Settings, view: JobView, monitors: MonitorView | None = None
    ) -> None:
        self._settings = settings
        self.view = view
        self.monitors = monitors or MonitorView()
        """Monitors and their checks (the monitors topic is read too)."""
        self._consumer = AIOKafkaConsumer(
            **client_options(settings),
            enable_auto_commit=False,
            group_id=None,
            fetch_max_bytes=FETCH_MAX_BYTES,
        )
        self._positions: dict[TopicPartition, int] = {}
        self._request_partitions: list[int] = []
        self._advanced = asyncio.Event()
        self._waiters = Waiters()
        """Callers of `caught_up`: the reader polls briefly while one waits (and until it
        is ready), else for `IDLE_POLL_MS`; records that come end a poll at once."""
        self._task: asyncio.Task[None] | None = None
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._contact = time.monotonic()
        """When the broker last answered (records, or the partitions' ends)."""
        self.ready = asyncio.Event()
        """Set once the view holds everything the topics held when the reader started."""
        self.live = True
        """False while the reads fail (the view lags behind the topics)."""

    async def __aenter__(self) -> Self:
        try:
            await asyncio.wait_for(self._consumer.start(), self._timeout_s)
            partitions = await self._assign()
        except (TimeoutError, OSError) as exc:
            await self._consumer.stop()
            raise BrokerUnavailableError(f"cannot reach Kafka: {exc}") from exc
        ends = await self._consumer.end_offsets(partitions)
        self._task = asyncio.create_task(self._run(dict(ends)), name="gateway-view")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await stop_consumer(self._consumer, self._timeout_s)

    async def caught_up(self, request_id: str) -> None:
        """Return once the view has read the requests partition of `request_id` up to its end
        as it is now: a job produced through any replica before this call is then known."""
        [partition] = [
            TopicPartition(self._settings.requests_topic, number)
            for number in [self._partition_of(request_id)]
        ]
        with self._waiters.waiting():
            end = (await self._consumer.end_offsets([partition]))[partition]
            async with asyncio.timeout(self._timeout_s):
                while self._positions.get(partition, 0) < end:
                    await self._wait_advance()

    async def caught_up_all(self) -> None:
        """Return once the view has read every requests and progress partition up to its end
        as it is now: every job started through any replica before this call is counted."""
        assigned = list(self._consumer.assignment())
        with self._waiters.waiting():
            ends = await self._consumer.end_offsets(assigned)
            async with asyncio.timeout(self._timeout_s):
                while any(self._positions.get(tp, 0) < end for tp, end in ends.items()):
                    await self._wait_advance()

    async def _wait_advance(self) -> None:
        event = self._advanced
        await event.wait()

    def _partition_of(self, request_id: str) -> int:
        partitioner = DefaultPartitioner()
        chosen: int = partitioner(request_id.encode(), self._request_partitions, [])
        return chosen

    async def _assign(self) -> list[TopicPartition]:
        settings = self._settings
        requests = sorted(await partitions_of(settings, settings.requests_topic))
        progress = sorted(await partitions_of(settings, settings.progress_topic))
        monitors = sorted(await partitions_of(settings, settings.monitors_topic))
        ticks = sorted(await partitions_of(settings, settings.monitor_ticks_topic))
        self._request_partitions = requests
        assigned = (
            [TopicPartition(settings.requests_topic, p) for p in requests]
            + [TopicPartition(settings.progress_topic, p) for p in progress]
            + [TopicPartition(settings.monitors_topic, p) for p in monitors]
            + [TopicPartition(settings.monitor_ticks_topic, p) for p in ticks]
        )
        self._consumer.assign(assigned)
        starts = await self._consumer.beginning_offsets(assigned)
        for tp, offset in starts.items():
            self._consumer.seek(tp, offset)  # not seek_to_beginning: it races the reset
            self._positions[tp] = offset
        return assigned

    async def _run(self, ends: dict[TopicPartition, int]) -> None:
        """Fold forever; broker trouble is logged and retried with backoff (the view only
        lags meanwhile: `caught_up` callers wait, up to their deadline)."""
        failures = 0
        while True:
            try:
                await self._round(ends)
                failures, self.live = 0, True
            except (KafkaError, TimeoutError) as exc:
                self.live = False
                wait_s = backoff_s(failures, base_s=RETRY_BASE_S, max_s=RETRY_MAX_S)
                log.warning("gateway.view_read_failed", error=repr(exc), wait_s=wait_s)
                failures += 1
                await asyncio.sleep(wait_s)

    async def _round(self, ends: dict[TopicPartition, int]) -> None:
        wait_ms = self._waiters.poll_ms if self.ready.is_set() else BRIEF_POLL_MS
        batch = await self._consumer.getmany(timeout_ms=wait_ms)
        for records in batch.values():
            for record in records:
                self._fold(record)
        if batch:
            self._contact = time.monotonic()
        elif time.monotonic() - self._contact > CONTACT_EVERY_S:
            assigned = list(self._consumer.assignment())
            await asyncio.wait_for(self._consumer.end_offsets(assigned), self._timeout_s)
            self._contact = time.monotonic()
        for tp in self._consumer.assignment():
            self._positions[tp] = await self._consumer.position(tp)
        self._signal()
        if not self.ready.is_set() and all(
            self._positions.get(tp, 0) >= end for tp, end in ends.items()
        ):
            log.info("gateway.view_ready", jobs=len(self.view))
            self.ready.set()

    def _signal(self) -> None:
        advanced, self._advanced = self._advanced, asyncio.Event()
        advanced.set()

    def _fold(self, record: ConsumerRecord[bytes, bytes]) -> None:
        try:
            if record.topic == self._settings.monitors_topic:
                self.monitors.monitor_record(record.key, record.value)
                return
            if record.topic == self._settings.monitor_ticks_topic:
                self.monitors.tick_record(record.value)
                return
            if record.topic == self._settings.progress_topic:
                event = ProgressEvent.model_validate_json(record.value)
                self.view.progressed(event)
                self.monitors.progressed(event)
                return
            request = json.loads(record.value)
            request_id = str(request["request_id"])
            metadata = request.get("metadata") or {}
            at = datetime.fromtimestamp(record.timestamp / 1000, UTC)
            self.monitors.request(request_id, metadata, at)
            marker = JobMarker.authentic(self.view.secret, request_id, metadata)
            if marker is not None:
                self.view.submitted(request_id, marker)
        except (ValueError, KeyError, TypeError, AttributeError):
            log.debug("gateway.record_skipped", topic=record.topic, offset=record.offset)
