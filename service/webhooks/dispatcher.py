"""`crawlstream webhooks`: a consumer group on the progress topic that delivers each job's
webhook events, at least once, in order per job, in a lane per receiver (no receiver waits
for another's). A partition's offset is committed only up to its first event not yet
delivered or given up. A record the dispatcher cannot use is counted, logged once and
skipped; nothing a record or a receiver does ends the process."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import KafkaError

from service.gateway.documents import document
from service.gateway.keys import KeyRing
from service.gateway.options import ScrapeChoices
from service.health import HealthServer
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.monitors.summary import summarise
from service.sealing.marker_auth import marker_secret
from service.sealing.targets import Sealer, SigningKeys
from service.webhooks import monitor_events
from service.webhooks.check_runs import CheckRuns
from service.webhooks.delivery import Deliverer
from service.webhooks.lanes import Lanes, Work
from service.webhooks.ledger import PartitionLedger
from service.webhooks.metrics import SkipReason, WebhookMetrics
from service.webhooks.payloads import webhook_event
from service.webhooks.records import Records
from service.webhooks.results import Results

if TYPE_CHECKING:
    from aiokafka import TopicPartition
    from aiokafka.structs import ConsumerRecord

    from service.contracts import ProgressEvent
    from service.contracts_monitors import MonitorCheckMarker
    from service.contracts_webhook import Hook
    from service.gateway.jobs import JobMarker
    from service.sealing.targets import Target
    from service.settings import Settings
    from service.webhooks.payloads import WebhookEvent
    from service.webhooks.records import Planned

log = structlog.get_logger(__name__)

POLL_TIMEOUT_MS: Final = 500

MAX_CHECKS_ENDED: Final = 10_000
"""Checks whose end this dispatcher remembers having sent: the terminal events of a check's
other requests, handled later, send nothing more."""

DEFAULT_CHOICES: Final = ScrapeChoices(formats=("markdown",))
"""The document shape of a `page` event of a request produced without the gateway."""


class Dispatcher:
    """Reads the progress topic in a group and delivers the webhooks of the events."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._consumer = AIOKafkaConsumer(
            **client_options(settings),
            group_id=settings.webhook_group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        keys = KeyRing.load(settings.gateway_keys_file)
        sealer = Sealer.from_settings(settings)
        sealer.check(keys)
        self._signing = SigningKeys.of(settings, keys)
        self._results = Results(settings)
        self._runs = CheckRuns(settings)
        self._checks_ended: OrderedDict[str, None] = OrderedDict()
        """Checks whose `monitor.check.completed` this dispatcher sent (the newest)."""
        self._ledgers: dict[TopicPartition, PartitionLedger] = {}
        self._stop = asyncio.Event()
        self.metrics = WebhookMetrics()
        self._lanes = Lanes(
            concurrency=settings.webhook_concurrency,
            depth=settings.webhook_queue_depth,
            failed=self.metrics.skipped.labels(SkipReason.FAILED).inc,
        )
        self._deliverer = Deliverer(settings)
        self._records = Records(
            sealer=sealer,
            metrics=self.metrics,
            max_age=settings.webhook_max_age,
            results_partitions=lambda: self._results.partitions,
            expired=self._expired,
            marker_secret=marker_secret(settings),
        )

    async def run(self) -> None:
        """Until SIGTERM or SIGINT: read, hand to the lanes, commit what is done, repeat."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        self._consumer.subscribe([self._settings.progress_topic], listener=_Listener(self))
        await self._consumer.start()
        await self._results.start()
        await self._runs.start()
        log.info("webhooks.started", group=self._settings.webhook_group_id)
        health = HealthServer(self.metrics, self._settings.metrics_port, self._ready)
        try:
            async with health, self._deliverer:
                while not self._stop.is_set():
                    await self._round()
                await self._lanes.close()
                await self._commit()
        finally:
            await self._lanes.close()
            await self._results.stop()
            await self._runs.stop()
            with contextlib.suppress(Exception):
                await stop_consumer(self._consumer, self._settings.kafka_timeout.total_seconds())

    async def _ready(self) -> dict[str, bool]:
        return {"assigned": bool(self._consumer.assignment())}

    async def _round(self) -> None:
        batch = await self._consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
        for tp, records in batch.items():
            ledger = self._ledgers.setdefault(tp, PartitionLedger())
            for record in records:
                if self._stop.is_set():  # the rest is read again by the next owner
                    break
                ledger.take(record.offset)
                await self._admit(record, ledger)
        await self._commit()
        await self._lanes.reap()
        self.metrics.lanes.set(len(self._lanes))

    async def _admit(self, record: ConsumerRecord[bytes, bytes], ledger: PartitionLedger) -> None:
        """Hand the record's event to its receiver's lane, or mark it done at once."""
        done = functools.partial(ledger.done, record.offset)
        planned = self._records.plan(record)
        if planned is None:
            done()
            return
        run = functools.partial(self._deliver, planned)
        work = Work(job=planned.event.request_id, run=run, done=done)
        lane = self._lanes.of(planned.target.origin)
        if lane.offer(work):
            return
        # the receiver's queue is full: stop reading (staying in the group) until it has room
        while not await lane.put(work, timeout_s=POLL_TIMEOUT_MS / 1000):
            if self._stop.is_set():  # left uncommitted: read again after the restart
                return
            await self._idle_poll()
        self._consumer.resume(*self._consumer.assignment())

    async def _idle_poll(self) -> None:
        """Poll with every partition paused (a member that stops polling leaves the group);
        anything a new assignment brings is sought back, to be read again later."""
        self._consumer.pause(*self._consumer.assignment())
        batch = await self._consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
        for tp, records in batch.items():
            if records:
                self._consumer.seek(tp, records[0].offset)
        await self._commit()

    async def _deliver(self, planned: Planned) -> None:
        """In the receiver's lane: the event's document (a page), the delivery, the count."""
        event, hook, target, marker = planned.event, planned.hook, planned.target, planned.marker
        if hook is not None and planned.check is not None:
            monitor_event = await self._monitor_event(planned, planned.check, hook)
            if monitor_event is not None:
                await self._send(target, monitor_event)
        elif hook is not None:
            data = await self._data(event, marker) if hook == "page" else []
            prefix = "batch_scrape" if marker is not None and marker.kind == "batch" else "crawl"
            delivered = await self._deliverer.deliver(
                target,
                webhook_event(event, hook, target, prefix=prefix, data=data),
                secret=self._signing.secret_for(target),
            )
            self.metrics.events.labels("delivered" if delivered else "dropped").inc()
        if event.is_terminal:
            self._results.forget(event.request_id)

    async def _send(self, target: Target, event: WebhookEvent) -> None:
        delivered = await self._deliverer.deliver(
            target, event, secret=self._signing.secret_for(target)
        )
        self.metrics.events.labels("delivered" if delivered else "dropped").inc()

    async def _monitor_event(
        self, planned: Planned, check: MonitorCheckMarker, hook: Hook
    ) -> WebhookEvent | None:
        """`monitor.page` with the page's result, or, once no request of the check runs,
        `monitor.check.completed` with the summary of every result of its requests (None:
        another request of the check still runs, or its end was sent already)."""
        event, target = planned.event, planned.target
        if hook == "page":
            try:
                result = await self._results.find(event, None, start=check.results_offset)
            except TimeoutError:
                log.warning("webhooks.result_missing", request_id=event.request_id)
                result = None
            return monitor_events.page_event(event, check, result, target)
        parts = monitor_events.parts_of(check, event)
        ends = {
            part.request_id: event.type
            if part.request_id == event.request_id
            else await self._runs.ended(part.request_id, part.progress_offset)
            for part in parts
        }
        status = monitor_events.check_status(ends)
        if status is None or check.check_id in self._checks_ended:
            return None
        self._checks_ended[check.check_id] = None  # no await since the look: sent once here
        while len(self._checks_ended) > MAX_CHECKS_ENDED:
            self._checks_ended.popitem(last=False)
        try:
            results = [
                result
                for part in parts
                for result in await self._results.scan(part.request_id, part.results_offset)
            ]
        except BaseException:  # not sent: the check's next request to end may send it
            self._checks_ended.pop(check.check_id, None)
            raise
        return monitor_events.check_event(check, status, summarise(results), target)

    def _expired(self, event: ProgressEvent) -> None:
        if event.is_terminal:
            self._results.forget(event.request_id)

    async def _data(self, event: ProgressEvent, marker: JobMarker | None) -> list[dict[str, Any]]:
        try:
            result = await self._results.find(event, marker)
        except TimeoutError:
            log.warning("webhooks.result_missing", request_id=event.request_id)
            return []
        choices = DEFAULT_CHOICES if marker is None else _choices(marker)
        return [document(result, choices)]

    async def _commit(self) -> None:
        """Commit each assigned partition's position where it moved; a failed commit is
        logged and tried again at the next round."""
        assigned = self._consumer.assignment()
        due = {
            tp: position
            for tp, ledger in self._ledgers.items()
            if tp in assigned and (position := ledger.due()) is not None
        }
        if not due:
            return
        try:
            await self._consumer.commit(due)
        except KafkaError as exc:
            log.warning("webhooks.commit_failed", error=repr(exc))
            return
        for tp, position in due.items():
            self._ledgers[tp].committed = position

    async def revoked(self, partitions: set[TopicPartition]) -> None:
        """Commit what is done of the partitions leaving, then forget them (their events
        still in lanes are delivered, and may be again by the next owner: at least once)."""
        await self._commit()
        for tp in partitions:
            self._ledgers.pop(tp, None)

    def assigned(self, partitions: set[TopicPartition]) -> None:
        for tp in partitions:
            self._ledgers[tp] = PartitionLedger()


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._dispatcher.revoked(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._dispatcher.assigned(assigned)


def _choices(marker: JobMarker) -> ScrapeChoices:
    return ScrapeChoices(
        formats=marker.formats,
        full_page=marker.full_page,
        remove_base64_images=marker.remove_base64_images,
        warning=marker.warning,
    )
