"""The worker process: consumer -> admission -> crawl -> publish -> commit."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import uuid
from typing import TYPE_CHECKING, Final

import structlog

from service.backpressure import Governor, MemorySampler
from service.backpressure.gate import MemoryGate
from service.browser.pool import BrowserPool
from service.contracts import ErrorCode, EventType, RecordSource
from service.control import ActiveRuns, CancelRegistry, ControlReader
from service.egress.proxy import EgressProxy
from service.egress.refusals import RefusedTargets
from service.errors import RejectedMessageError
from service.health import HealthServer
from service.http import StaticFetcher
from service.http.robots import HttpRobotsSource, RobotsCache
from service.logs import get_logger
from service.messaging.consumer import RequestConsumer
from service.messaging.dead_letter import send_dead_letter
from service.messaging.failures import PublishError, root_cause
from service.messaging.offsets import Verdict
from service.messaging.publisher import Publisher
from service.messaging.topics import ensure_topics
from service.net.policy import UrlPolicy
from service.paths import PageRenderer
from service.worker.deep import new_run
from service.worker.deps import WorkerDeps
from service.worker.intake import parse_request
from service.worker.outputs import RunOutputs
from service.worker.scheduler import PageScheduler, SlotLimits

if TYPE_CHECKING:
    from aiokafka import ConsumerRecord

    from service.control import Cancel
    from service.messaging.offsets import Delivery
    from service.metrics import Metrics
    from service.settings import Settings

log = get_logger(__name__)

URLS_EWMA_WEIGHT: Final = 0.2
"""Weight of the newest request in the running mean of URLs per request (fetch sizing)."""


class Worker:
    """Runs until SIGTERM/SIGINT (or `stop()`), then drains, commits and exits cleanly."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._settings = settings
        self._metrics = metrics
        self._consumer: RequestConsumer | None = None
        self._deps: WorkerDeps | None = None
        self._stop_requested = asyncio.Event()
        self._arrivals = itertools.count()
        self._urls_per_request = float(settings.max_urls_per_request)  # until requests are seen
        self._active = ActiveRuns()
        """request_id -> its runs in progress here: a cancel reaches them at once."""

    def stop(self) -> None:
        self._stop_requested.set()
        if self._consumer is not None:
            self._consumer.stop()

    async def run(self) -> None:
        settings = self._settings
        await ensure_topics(settings)
        policy = UrlPolicy.from_settings(settings)
        async with contextlib.AsyncExitStack() as stack:
            publisher = await stack.enter_async_context(Publisher(settings))
            refusals = RefusedTargets()
            proxy = await stack.enter_async_context(
                EgressProxy.from_settings(settings, policy, on_blocked=refusals.record)
            )
            restarts = self._metrics.browser_restarts
            contexts = self._metrics.browser_contexts
            pool = await stack.enter_async_context(
                BrowserPool(
                    settings,
                    proxy=proxy.access,
                    on_restart=lambda reason: restarts.labels(reason).inc(),
                    on_context=lambda source: contexts.labels(source).inc(),
                )
            )
            robots_source = await stack.enter_async_context(HttpRobotsSource(proxy.access))
            robots = await stack.enter_async_context(RobotsCache(robots_source))
            static = await stack.enter_async_context(StaticFetcher(proxy.access, policy))
            renderer = PageRenderer.from_settings(static, settings, self._metrics)
            control = await stack.enter_async_context(
                ControlReader(settings, self._cancels(), self._metrics)
            )
            gate = await self._memory_gate(stack)
            scheduler = PageScheduler(gate, SlotLimits.from_settings(settings))
            gate.attach(scheduler, pool)
            self._metrics.pages_pending.set_function(lambda: scheduler.pending)
            self._metrics.browser_pages.set_function(lambda: pool.open_pages)
            self._deps = WorkerDeps(
                settings=settings,
                publisher=publisher,
                pool=pool,
                policy=policy,
                scheduler=scheduler,
                metrics=self._metrics,
                robots=robots,
                control=control,
                refusals=refusals,
                sitemaps=robots_source,
                renderer=renderer,
            )
            self._consumer = RequestConsumer(
                settings,
                self._handle,
                self._metrics,
                should_pause=gate.should_pause,
                intake_room=lambda: self._intake_room(scheduler),
            )
            await stack.enter_async_context(
                HealthServer(self._metrics, settings.metrics_port, self._readiness)
            )
            self._install_signals()
            if self._stop_requested.is_set():
                self._consumer.stop()
            log.info(
                "worker.started",
                worker=settings.worker_name,
                group=settings.group_id,
                topic=settings.requests_topic,
            )
            await self._consumer.run()
        log.info("worker.stopped", worker=settings.worker_name)

    async def _memory_gate(self, stack: contextlib.AsyncExitStack) -> MemoryGate:
        """The sampler feeds the gate, which applies the governor's decisions."""
        settings = self._settings
        gates: list[MemoryGate] = []  # the gate is built from the sampler's first snapshot
        sampler = await stack.enter_async_context(
            MemorySampler.from_settings(settings, listener=lambda s: gates[0].on_sample(s))  # noqa: PLW0108
        )
        gate = MemoryGate(
            Governor.from_settings(settings),
            self._metrics,
            backlog_capacity=settings.max_queued_pages,
            first=sampler.latest,
            enforce=settings.memory_governor,
            ceiling=settings.max_page_slots,
        )
        gates.append(gate)
        log.info(
            "memory.limit",
            limit_mib=sampler.latest.limit_bytes // 2**20,
            source=str(sampler.latest.source),
            bound_by=sampler.latest.bound_by,
            cgroup=sampler.latest.cgroup_path,
            headroom_mib=sampler.latest.headroom_bytes // 2**20,
            governor=settings.memory_governor,
        )
        return gate

    def _cancels(self) -> CancelRegistry:
        """The registry the control reader fills; each cancel goes at once to its runs here."""
        registry = CancelRegistry(self._settings.cancel_retention)

        def stop_runs(cancel: Cancel) -> None:
            if self._active.cancel(cancel):
                log.info("request.cancelling", request_id=cancel.request_id)

        registry.listen(stop_runs)
        return registry

    def _intake_room(self, scheduler: PageScheduler) -> int:
        """Request records the local page backlog has room for, at the typical request size."""
        room = self._settings.max_queued_pages - scheduler.intake_backlog
        return max(room, 0) // max(round(self._urls_per_request), 1)

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)

    async def _readiness(self) -> dict[str, bool]:
        consumer, deps = self._consumer, self._deps
        return {
            "broker": consumer is not None and await consumer.broker_reachable(),
            "browser": deps is not None and deps.pool.is_ready(),
        }

    async def _handle(
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
                await self._process(record, source, next(self._arrivals), owned)
        except Exception as exc:  # the record's error boundary
            cause = root_cause(exc)
            log.exception("request.crashed", error=repr(cause), exc_info=cause)
            self._metrics.requests.labels("crashed").inc()
            code = "publish_failed" if isinstance(cause, PublishError) else "internal"
            error = RejectedMessageError(code, f"{type(cause).__name__}: {cause}", None)
            await self._dead_letter(record, error, owned)

    async def _process(
        self,
        record: ConsumerRecord[bytes, bytes],
        source: RecordSource,
        priority: int,
        owned: asyncio.Event,
    ) -> None:
        try:
            request = parse_request(record.value, self._settings)
        except RejectedMessageError as exc:
            await self._reject(record, source, exc, owned)
            return
        self._urls_per_request += URLS_EWMA_WEIGHT * (len(request.urls) - self._urls_per_request)
        with structlog.contextvars.bound_contextvars(request_id=request.request_id):
            run = new_run(
                self._require_deps(),
                request,
                source=source,
                priority=priority,
                owned=owned,
                since_ms=record.timestamp,
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
            poison = RejectedMessageError("poison", message, exc.request_id)
            await self._reject(record, source, poison, owned)
            return
        log.error("request.poison", deliveries=delivery.count, request_id=request.request_id)
        poison = RejectedMessageError("poison", message, request.request_id)
        await self._dead_letter(record, poison, owned)
        run = new_run(self._require_deps(), request, source=source, owned=owned)
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
            deps = self._require_deps()
            outputs = RunOutputs(
                deps.publisher,
                self._settings,
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
        publisher = self._require_deps().publisher
        await send_dead_letter(publisher, self._settings, record, exc, owned)
        self._metrics.dead_letters.labels(exc.code).inc()

    def _require_deps(self) -> WorkerDeps:
        if self._deps is None:
            raise RuntimeError("the worker is not running")
        return self._deps
