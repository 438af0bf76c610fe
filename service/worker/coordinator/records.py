"""The coordinator's request records: each record's one error boundary, from its delivery to
a finished run, a rejection or a dead letter."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Protocol

import structlog

from service.contracts import DeadLetterCode, ErrorCode, EventType, RecordSource
from service.errors import RejectedMessageError
from service.logs import get_logger
from service.messaging.dead_letter import send_dead_letter
from service.messaging.failures import PublishError, root_cause
from service.messaging.offsets import Verdict
from service.worker.coordinator.intake import parse_request
from service.worker.coordinator.outputs import Destinations, RunOutputs
from service.worker.coordinator.run import Run

if TYPE_CHECKING:
    import asyncio

    from aiokafka import ConsumerRecord

    from service.control import ActiveRuns
    from service.messaging.offsets import Delivery
    from service.worker.coordinator.deps import CoordinatorDeps

log = get_logger(__name__)


class Reliever(Protocol):
    """The requests consumer: a run that only waits for pages relieves its record's charge."""

    async def relieved(self, record: ConsumerRecord[bytes, bytes]) -> None: ...


class Coordinator:
    """Handles the request records of the partitions this worker owns in the coordinator
    group (`handle`, the requests consumer's handler)."""

    def __init__(self, deps: CoordinatorDeps, active: ActiveRuns, reliever: Reliever) -> None:
        """`reliever`: the requests consumer whose records this coordinator handles."""
        self._deps = deps
        self._settings = deps.settings
        self._active = active
        self._reliever = reliever
        self._destinations = Destinations.from_settings(deps.settings)

    def full(self, _partition: int) -> bool:
        """A request partition is never held for this coordinator's sake."""
        return False

    async def handle(
        self, record: ConsumerRecord[bytes, bytes], delivery: Delivery, owned: asyncio.Event
    ) -> None:
        """Take one record to its end: a finished run or a dead letter, whatever goes wrong.

        This is the record's one error boundary. Broker trouble never reaches it (the run
        re-sends what it rendered until the broker takes it); what does (a bug, a message that
        can never be published) sends the record to the dead letters, so its offset finishes
        and the partition goes on.
        """
        source = RecordSource(topic=record.topic, partition=record.partition, offset=record.offset)
        try:
            if delivery.verdict is Verdict.POISON:
                await self._quarantine(record, source, delivery, owned)
            else:
                await self._process(record, source, delivery, owned)
        except Exception as exc:  # the record's error boundary
            cause = root_cause(exc)
            log.exception("request.crashed", error=repr(cause), exc_info=cause)
            self._deps.metrics.requests.labels("crashed").inc()
            failed = isinstance(cause, PublishError)
            code = DeadLetterCode.PUBLISH_FAILED if failed else DeadLetterCode.INTERNAL
            error = RejectedMessageError(code, f"{type(cause).__name__}: {cause}", None)
            await self._dead_letter(record, error, owned)

    async def _process(
        self,
        record: ConsumerRecord[bytes, bytes],
        source: RecordSource,
        delivery: Delivery,
        owned: asyncio.Event,
    ) -> None:
        try:
            request = parse_request(record.value, self._settings)
        except RejectedMessageError as exc:
            await self._reject(record, source, exc, owned)
            return
        reliever = self._reliever
        with structlog.contextvars.bound_contextvars(request_id=request.request_id):
            run = Run(
                self._deps,
                request,
                source=source,
                priority=record.timestamp,
                owned=owned,
                since_ms=record.timestamp,
                earlier=delivery.earlier,
                relieve=lambda: reliever.relieved(record),
            )
            with self._active.running(request.request_id, run):
                await run.execute()

    async def _quarantine(
        self,
        record: ConsumerRecord[bytes, bytes],
        source: RecordSource,
        delivery: Delivery,
        owned: asyncio.Event,
    ) -> None:
        """A record whose worker died under it too often: dead-letter it, fail every URL."""
        message = (
            f"delivered {delivery.count} times; each earlier delivery ended with its worker "
            f"dying (CRAWL_MAX_DELIVERIES={self._settings.max_deliveries})"
        )
        try:
            request = parse_request(record.value, self._settings)
        except RejectedMessageError as exc:
            poison = RejectedMessageError(DeadLetterCode.POISON, message, exc.request_id)
            await self._reject(record, source, poison, owned)
            return
        log.error("request.poison", deliveries=delivery.count, request_id=request.request_id)
        poison = RejectedMessageError(DeadLetterCode.POISON, message, request.request_id)
        await self._dead_letter(record, poison, owned)
        run = Run(self._deps, request, source=source, owned=owned)
        await run.fail_all(ErrorCode.POISON, message)

    async def _reject(
        self,
        record: ConsumerRecord[bytes, bytes],
        source: RecordSource,
        exc: RejectedMessageError,
        owned: asyncio.Event,
    ) -> None:
        log.warning(
            "request.rejected", code=exc.code, message=exc.message, request_id=exc.request_id
        )
        await self._dead_letter(record, exc, owned)
        if exc.request_id is not None:
            outputs = RunOutputs(
                self._deps.publisher,
                self._destinations,
                request_id=exc.request_id,
                run_id=uuid.uuid4().hex,
                total=0,
                request_metadata={},
                source=source,
                owned=owned,
            )
            await outputs.event(EventType.REJECTED, detail=f"{exc.code}: {exc.message}")
            await outputs.acknowledged()

    async def _dead_letter(
        self, record: ConsumerRecord[bytes, bytes], exc: RejectedMessageError, owned: asyncio.Event
    ) -> None:
        await send_dead_letter(self._deps.publisher, self._settings, record, exc, owned)
        self._deps.metrics.dead_letters.labels(exc.code).inc()
