"""`crawlstream webhooks`: a consumer group on the progress topic that delivers each job's
webhook events in order (one partition at a time, in offset order), at least once: a
partition's offset is committed only after its events were delivered or given up."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from pydantic import ValidationError

from service.contracts import PageResult, ProgressEvent, utc_now
from service.contracts_webhook import WebhookConfig
from service.gateway.documents import document
from service.gateway.jobs import JobMarker
from service.gateway.options import ScrapeChoices
from service.health import HealthServer
from service.messaging.chunks import Reassembler
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.webhooks.delivery import Deliverer
from service.webhooks.metrics import WebhookMetrics
from service.webhooks.payloads import hook_of, webhook_event

if TYPE_CHECKING:
    from aiokafka.structs import ConsumerRecord

    from service.settings import Settings

log = structlog.get_logger(__name__)

POLL_TIMEOUT_MS: Final = 500

RESULT_LOOKBACK: Final = timedelta(minutes=5)
"""How far before a page event the search for its result starts, for requests produced
without the gateway (whose marker names where the job's results begin)."""

DEFAULT_CHOICES: Final = ScrapeChoices(formats=("markdown",))
"""The document shape of a `page` event of a request produced without the gateway."""


class _Results:
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
        await self._consumer.stop()

    def forget(self, job_id: str) -> None:
        self._positions.pop(job_id, None)
        self._found.pop(job_id, None)
        self._taken.pop(job_id, None)
        self._chunks.pop(job_id, None)

    async def find(self, event: ProgressEvent, marker: JobMarker | None) -> PageResult:
        """The result of a page event; TimeoutError when it cannot be read in time."""
        async with self._lock, asyncio.timeout(self._settings.kafka_timeout.total_seconds()):
            found = self._found.setdefault(event.request_id, {})
            taken = self._taken.setdefault(event.request_id, set())
            result_id = str(event.result_id)
            tp = self._partition(event.request_id, marker)
            again = result_id in taken and result_id not in found
            if again or event.request_id not in self._positions:
                # a repeated event reads the job's results again from where they begin
                self._positions[event.request_id] = await self._start(tp, event, marker)
            while result_id not in found:
                await self._read(tp, event.request_id, found, result_id, taken)
            taken.add(result_id)
            return found.pop(result_id)

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
            whole = chunks.add(record.value, list(record.headers))
            if whole is not None:
                result = PageResult.model_validate_json(whole)
                if result.result_id == wanted or result.result_id not in taken:
                    found[result.result_id] = result


class Dispatcher:
    """Reads the progress topic in a group and delivers the webhooks of the events."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._consumer = AIOKafkaConsumer(
            settings.progress_topic,
            **client_options(settings),
            group_id=settings.webhook_group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self._results = _Results(settings)
        self._stop = asyncio.Event()
        self.metrics = WebhookMetrics()

    async def run(self) -> None:
        """Until SIGTERM or SIGINT: deliver, commit, repeat."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        await self._consumer.start()
        await self._results.start()
        log.info("webhooks.started", group=self._settings.webhook_group_id)
        health = HealthServer(self.metrics, self._settings.metrics_port, self._ready)
        try:
            async with health, Deliverer(self._settings) as deliverer:
                while not self._stop.is_set():
                    await self._round(deliverer)
        finally:
            await self._results.stop()
            with contextlib.suppress(Exception):
                await self._consumer.stop()

    async def _ready(self) -> dict[str, bool]:
        return {"assigned": bool(self._consumer.assignment())}

    async def _round(self, deliverer: Deliverer) -> None:
        batch = await self._consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
        for tp, records in batch.items():
            for record in records:
                await self._handle(deliverer, record)
            if records:
                await self._consumer.commit({tp: records[-1].offset + 1})

    async def _handle(self, deliverer: Deliverer, record: ConsumerRecord[bytes, bytes]) -> None:
        try:
            event = ProgressEvent.model_validate_json(record.value)
            config = WebhookConfig.of(event.request_metadata)
            marker = JobMarker.of(event.request_metadata)
        except (ValidationError, ValueError):
            log.warning("webhooks.skipped", partition=record.partition, offset=record.offset)
            return
        if config is None:
            return
        if utc_now() - event.at > self._settings.webhook_max_age:
            log.info("webhook.expired", request_id=event.request_id, type=event.type.value)
            self.metrics.events.labels("expired").inc()
            return
        hook = hook_of(event, config)
        if hook is not None:
            data = await self._data(event, marker) if hook == "page" else []
            prefix = "batch_scrape" if marker is not None and marker.kind == "batch" else "crawl"
            delivered = await deliverer.deliver(
                config, webhook_event(event, hook, config, prefix=prefix, data=data)
            )
            self.metrics.events.labels("delivered" if delivered else "dropped").inc()
        if event.is_terminal:
            self._results.forget(event.request_id)

    async def _data(self, event: ProgressEvent, marker: JobMarker | None) -> list[dict[str, Any]]:
        try:
            result = await self._results.find(event, marker)
        except TimeoutError:
            log.warning("webhooks.result_missing", request_id=event.request_id, url=event.url)
            return []
        choices = DEFAULT_CHOICES if marker is None else _choices(marker)
        return [document(result, choices)]


def _choices(marker: JobMarker) -> ScrapeChoices:
    return ScrapeChoices(
        formats=marker.formats,
        full_page=marker.full_page,
        remove_base64_images=marker.remove_base64_images,
        warning=marker.warning,
    )
