"""The worker process: consumer -> admission -> crawl -> publish -> commit."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import uuid
from typing import TYPE_CHECKING, Final

import structlog
from aiokafka.errors import KafkaError

from service.backpressure import Governor, MemorySampler
from service.backpressure.gate import MemoryGate
from service.contracts import EventType
from service.crawling.browser import BrowserPool
from service.crawling.egress_proxy import EgressProxy
from service.crawling.robots import HttpRobotsSource, RobotsCache
from service.crawling.url_policy import UrlPolicy
from service.errors import RejectedMessageError, RetryableError
from service.health import HealthServer
from service.logs import get_logger
from service.messaging.consumer import RequestConsumer
from service.messaging.dead_letter import send_dead_letter
from service.messaging.publisher import Publisher
from service.messaging.topics import ensure_topics
from service.worker.deps import WorkerDeps
from service.worker.intake import parse_request
from service.worker.outputs import RunOutputs
from service.worker.run import RequestRun
from service.worker.scheduler import PageScheduler, SlotLimits

if TYPE_CHECKING:
    from aiokafka import ConsumerRecord

    from service.metrics import Metrics
    from service.settings import Settings

log = get_logger(__name__)

RETRY_BACKOFF_S: Final = (1.0, 2.0, 5.0, 10.0, 20.0)
"""Waits before running a request again after broker trouble; the last one repeats."""


class Worker:
    """Runs until SIGTERM/SIGINT (or `stop()`), then drains, commits and exits cleanly."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._settings = settings
        self._metrics = metrics
        self._consumer: RequestConsumer | None = None
        self._deps: WorkerDeps | None = None
        self._stop_requested = asyncio.Event()
        self._arrivals = itertools.count()

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
            proxy = await stack.enter_async_context(EgressProxy(policy))
            restarts = self._metrics.browser_restarts
            pool = await stack.enter_async_context(
                BrowserPool(
                    settings,
                    proxy_server=proxy.url,
                    on_restart=lambda reason: restarts.labels(reason).inc(),
                )
            )
            robots_source = await stack.enter_async_context(HttpRobotsSource(proxy.url))
            robots = await stack.enter_async_context(RobotsCache(robots_source))
            gate = await self._memory_gate(stack)
            scheduler = PageScheduler(gate, SlotLimits.from_settings(settings))
            gate.attach(scheduler, pool)
            self._deps = WorkerDeps(
                settings=settings,
                publisher=publisher,
                pool=pool,
                policy=policy,
                scheduler=scheduler,
                metrics=self._metrics,
                robots=robots,
            )
            self._consumer = RequestConsumer(
                settings, self._handle, self._metrics, should_pause=gate.should_pause
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
            governor=settings.memory_governor,
        )
        return gate

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

    async def _handle(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """Process one record to its end; broker trouble runs it again after a backoff."""
        priority = next(self._arrivals)
        for attempt in itertools.count():
            try:
                await self._process(record, priority)
            except (RetryableError, KafkaError, TimeoutError) as exc:
                delay = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
                log.warning("request.retrying", error=repr(exc), delay_s=delay)
                await asyncio.sleep(delay)
            else:
                return

    async def _process(self, record: ConsumerRecord[bytes, bytes], priority: int) -> None:
        try:
            request = parse_request(record.value, self._settings)
        except RejectedMessageError as exc:
            await self._reject(record, exc)
            return
        with structlog.contextvars.bound_contextvars(request_id=request.request_id):
            await RequestRun(self._require_deps(), request, priority=priority).execute()

    async def _reject(
        self, record: ConsumerRecord[bytes, bytes], exc: RejectedMessageError
    ) -> None:
        deps = self._require_deps()
        log.warning(
            "request.rejected", code=exc.code, message=exc.message, request_id=exc.request_id
        )
        await send_dead_letter(deps.publisher, self._settings, record, exc)
        self._metrics.dead_letters.labels(exc.code).inc()
        if exc.request_id is not None:
            outputs = RunOutputs(
                deps.publisher,
                self._settings,
                request_id=exc.request_id,
                run_id=uuid.uuid4().hex,
                total=0,
                request_metadata={},
            )
            await outputs.event(EventType.REJECTED, detail=f"{exc.code}: {exc.message}")
            await outputs.acknowledged()

    def _require_deps(self) -> WorkerDeps:
        if self._deps is None:
            raise RuntimeError("the worker is not running")
        return self._deps
