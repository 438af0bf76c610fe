"""The worker process: consumer -> admission -> crawl -> publish -> commit."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING

from service.background import log_tasks
from service.backpressure import Governor, MemorySampler
from service.backpressure.gate import MemoryGate, SlotAdmission
from service.browser.pool import BrowserPool
from service.cache import KafkaCacheStore, PageCache, tenant_scope
from service.changes import ChangeTracker, KafkaHistoryStore
from service.content.offload import ContentPool, using
from service.control import ActiveRuns, CancelRegistry, ControlReader
from service.egress.proxy import EgressProxy
from service.egress.refusals import RefusedTargets
from service.frontier.tail import FrontierTail
from service.health import HealthServer
from service.http import StaticFetcher
from service.http.robots import HttpRobotsSource, RobotsCache
from service.logs import get_logger
from service.messaging.consumer import RecordConsumer
from service.messaging.diagnosis import log_consumer_state
from service.messaging.publisher import Message, Publisher
from service.messaging.seal import Seal
from service.messaging.topics import check_copartitioned, ensure_topics, ready_partitions
from service.net.policy import UrlPolicy
from service.paths import BrowserPath, PageRenderer, RunContexts
from service.worker.consumers import pages_spec, requests_spec
from service.worker.coordinator.deps import CoordinatorDeps
from service.worker.coordinator.monitors import MonitorScheduler
from service.worker.coordinator.page_keys import page_key
from service.worker.coordinator.placement import Hashed, HostDirectory
from service.worker.coordinator.records import Coordinator
from service.worker.fetcher.deps import FetcherDeps
from service.worker.fetcher.lane import LocalLane
from service.worker.fetcher.records import Fetcher
from service.worker.fetcher.scheduler import PageScheduler, SlotLimits

if TYPE_CHECKING:
    from collections.abc import Callable

    from aiokafka import TopicPartition

    from service.contracts import PageTask
    from service.control import Cancel
    from service.metrics import Metrics
    from service.settings import Settings
    from service.worker.coordinator.placement import PagePartitions

log = get_logger(__name__)


class Worker:
    """Runs until SIGTERM/SIGINT (or `stop()`), then drains, commits and exits cleanly.

    A coordinator (`CRAWL_ROLE` coordinator or all) consumes the requests topic and runs
    requests; a fetcher (fetcher or all) consumes the pages topic and renders pages."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._settings = settings
        self._metrics = metrics
        self._consumers: list[RecordConsumer[Coordinator] | RecordConsumer[Fetcher]] = []
        self._fetcher: FetcherDeps | None = None
        self._requests: RecordConsumer[Coordinator] | None = None
        """The coordinator's consumer: the monitors of a partition fire where it is owned."""
        self._stop_requested = asyncio.Event()
        self._active = ActiveRuns()
        self._seal = Seal.from_settings(settings)
        """Tags and checks internal records (`run` gives it the worker's counter)."""
        """request_id -> its runs and pages in progress here: a cancel reaches them at once."""

    @property
    def _coordinates(self) -> bool:
        return self._settings.role in {"all", "coordinator"}

    @property
    def _fetches(self) -> bool:
        return self._settings.role in {"all", "fetcher"}

    def stop(self) -> None:
        self._stop_requested.set()
        for consumer in self._consumers:
            consumer.stop()

    async def run(self) -> None:
        settings = self._settings
        await ensure_topics(settings)
        counts = await ready_partitions(settings)
        check_copartitioned(settings, counts)
        policy = UrlPolicy.from_settings(settings)
        rejected = self._metrics.internal_records_rejected
        self._seal = Seal.from_settings(
            settings, on_rejected=lambda topic, reason: rejected.labels(topic, reason).inc()
        )
        if not self._seal.authenticated:
            log.warning(
                "internal.unauthenticated",
                deployment=self._seal.deployment,
                note="CRAWL_CLUSTER_SECRET is unset: internal records carry a tag anyone "
                "who knows the deployment's name can make; set it (and the Kafka ACLs of "
                "deploy/kafka/acls.sh) so that no producer can forge a task or an outcome",
            )
        async with contextlib.AsyncExitStack() as stack:
            refusals = RefusedTargets()
            proxy = await stack.enter_async_context(
                EgressProxy.from_settings(settings, policy, on_blocked=refusals.record)
            )
            robots_source = await stack.enter_async_context(HttpRobotsSource(proxy.access))
            control = await stack.enter_async_context(
                ControlReader(settings, self._cancels(), self._metrics)
            )
            tail: FrontierTail | None = None
            placement: PagePartitions | None = None
            publisher: Publisher | None = None
            if self._coordinates:
                tail = await stack.enter_async_context(FrontierTail(settings, self._seal))
                tail.set_partitions(counts[settings.frontier_topic])
                # Each role has its own producer: aiokafka sends one produce request per
                # broker at a time, so the fetcher's results would otherwise queue behind
                # the coordinator's tasks and events (and each page waits for two acks).
                publisher = await stack.enter_async_context(Publisher(settings))
                placement = await self._placement(stack, publisher, counts)
            lane: LocalLane | None = None
            fetcher: RecordConsumer[Fetcher] | None = None
            if self._fetches:
                fetcher, lane = await self._fetcher_role(
                    stack, proxy, policy, refusals, robots_source, control, tail, placement
                )
                self._consumers.append(fetcher)
            if tail is not None and publisher is not None and placement is not None:
                deps = CoordinatorDeps(
                    settings=settings,
                    publisher=publisher,
                    placement=placement,
                    metrics=self._metrics,
                    control=control,
                    tail=tail,
                    sitemaps=robots_source,
                    local=lane,
                )
                monitors = await stack.enter_async_context(
                    MonitorScheduler(settings, publisher, self._owns_request_partition, counts)
                )

                async def assigned(tps: set[TopicPartition]) -> None:
                    await tail.follow({tp.partition for tp in tps})
                    await monitors.follow({tp.partition for tp in tps})

                requests = RecordConsumer(
                    settings,
                    lambda consumer: Coordinator(deps, self._active, consumer),
                    self._metrics,
                    spec=requests_spec(settings, self._metrics, on_assigned=assigned),
                )
                self._requests = requests
                self._consumers.insert(0, requests)
            await stack.enter_async_context(
                HealthServer(self._metrics, settings.metrics_port, self._readiness)
            )
            self._install_signals()
            if self._stop_requested.is_set():
                self.stop()
            log.info(
                "worker.started",
                worker=settings.worker_name,
                role=settings.role,
                deployment=settings.deployment,
                group=settings.group_id,
                fetcher_group=settings.fetcher_group_id,
                topic=settings.requests_topic,
                pages_topic=settings.pages_topic,
            )
            await asyncio.gather(*(consumer.run() for consumer in self._consumers))
            if lane is not None:
                await lane.close()
            if fetcher is not None:
                await fetcher.handler.close()
        log.info("worker.stopped", worker=settings.worker_name)

    async def _fetcher_role(
        self,
        stack: contextlib.AsyncExitStack,
        proxy: EgressProxy,
        policy: UrlPolicy,
        refusals: RefusedTargets,
        robots_source: HttpRobotsSource,
        control: ControlReader,
        tail: FrontierTail | None,
        placement: PagePartitions | None,
    ) -> tuple[RecordConsumer[Fetcher], LocalLane | None]:
        """The browser, the page slots and the pages consumer; with a coordinator in this
        process, the lane its tasks take to this fetcher."""
        settings = self._settings
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
        robots = await stack.enter_async_context(RobotsCache(robots_source))
        content = await stack.enter_async_context(ContentPool.from_settings(settings))
        stack.enter_context(using(content))
        static = await stack.enter_async_context(StaticFetcher(proxy.access, policy))
        run_contexts = RunContexts(pool)
        browser = BrowserPath.from_settings(run_contexts, settings, self._metrics, refusals)
        renderer = PageRenderer.from_settings(static, browser, settings, self._metrics)
        publisher = await stack.enter_async_context(Publisher(settings))
        store = await stack.enter_async_context(KafkaCacheStore(settings, publisher))
        cache = PageCache(store, self._metrics, scope=_cache_scope(settings))
        stack.push_async_callback(cache.close)
        history = await stack.enter_async_context(KafkaHistoryStore(settings, publisher))
        changes = ChangeTracker(
            history,
            lambda message: _acknowledged(publisher, message),
            self._metrics,
            changes_topic=settings.changes_topic,
        )
        scheduler, gate = await self._page_slots(stack, pool)
        self._metrics.pages_pending.set_function(lambda: scheduler.pending)
        self._metrics.browser_pages.set_function(lambda: pool.open_pages)
        self._fetcher = FetcherDeps(
            settings=settings,
            publisher=publisher,
            metrics=self._metrics,
            control=control,
            pool=pool,
            scheduler=scheduler,
            policy=policy,
            robots=robots,
            refusals=refusals,
            renderer=renderer,
            contexts=run_contexts,
            cache=cache,
            static=static,
            changes=changes,
            seal=self._seal,
        )
        deps = self._fetcher
        consumer = RecordConsumer(
            settings,
            lambda deliveries: Fetcher(deps, self._active, deliveries, local_tail=tail),
            self._metrics,
            should_pause=gate.should_pause,
            intake_room=lambda: max(settings.max_queued_pages - scheduler.intake_backlog, 0),
            spec=pages_spec(settings, self._metrics),
        )
        if tail is None or placement is None or not settings.local_pages:
            return consumer, None
        lane = LocalLane(
            consumer.handler,
            owns=lambda key: _lane_may_take(consumer, placement.partition(key)),
            paused=lambda: gate.paused,
            partition_of=lambda task: placement.partition(
                page_key(task.url, task.options, settings)
            ),
        )
        return consumer, lane

    async def _placement(
        self, stack: contextlib.AsyncExitStack, publisher: Publisher, counts: dict[str, int]
    ) -> PagePartitions:
        """Where this coordinator sends each page key (`CRAWL_HOST_PLACEMENT`)."""
        settings = self._settings
        partitions = counts[settings.pages_topic]
        if settings.host_placement == "hash":
            return Hashed(partitions)
        return await stack.enter_async_context(
            HostDirectory(settings, publisher, partitions, self._seal)
        )

    async def _page_slots(
        self, stack: contextlib.AsyncExitStack, pool: BrowserPool
    ) -> tuple[PageScheduler, MemoryGate]:
        """The page slots, admitted by the governor on the sampler's latest snapshot, and the
        gate the sampler feeds, which applies the governor's decisions to slots and browser."""
        settings = self._settings
        sampler = await stack.enter_async_context(MemorySampler.from_settings(settings))
        admission = SlotAdmission(
            Governor.from_settings(settings),
            sampler.latest,
            enforce=settings.memory_governor,
            ceiling=settings.max_page_slots,
        )
        scheduler = PageScheduler(admission, SlotLimits.from_settings(settings))
        gate = MemoryGate(
            admission,
            self._metrics,
            slots=scheduler,
            browsers=pool,
            backlog_capacity=settings.max_queued_pages,
        )
        sampler.listen(gate.on_sample)
        log.info(
            "memory.limit",
            limit_mib=sampler.latest.limit_bytes // 2**20,
            source=str(sampler.latest.source),
            bound_by=sampler.latest.bound_by,
            cgroup=sampler.latest.cgroup_path,
            headroom_mib=sampler.latest.headroom_bytes // 2**20,
            governor=settings.memory_governor,
        )
        return scheduler, gate

    def _cancels(self) -> CancelRegistry:
        """The registry the control reader fills; each cancel goes at once to its runs here."""
        registry = CancelRegistry(self._settings.cancel_retention)

        def stop_runs(cancel: Cancel) -> None:
            if self._active.cancel(cancel):
                log.info("request.cancelling", request_id=cancel.request_id)

        registry.listen(stop_runs)
        return registry

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        loop.add_signal_handler(signal.SIGUSR1, self._log_state)

    def _log_state(self) -> None:
        """SIGUSR1: where every task waits, and what each consumer reads and why not."""
        log_tasks()
        for consumer in self._consumers:
            log_consumer_state(consumer)
        if self._fetcher is not None:
            scheduler = self._fetcher.scheduler
            log.warning(
                "slots.state",
                pending=scheduler.pending,
                backlog=scheduler.backlog,
                intake_backlog=scheduler.intake_backlog,
                rendering=scheduler.in_flight,
                queued=scheduler.queued,
                paced=scheduler.paced,
                startable=scheduler.startable,
            )

    def _owns_request_partition(self, partition: int) -> bool:
        return self._requests is not None and self._requests.owns(partition)

    async def _readiness(self) -> dict[str, bool]:
        consumer = self._consumers[0] if self._consumers else None
        checks = {"broker": consumer is not None and await consumer.broker_reachable()}
        if self._fetches:
            checks["browser"] = self._fetcher is not None and self._fetcher.pool.is_ready()
        return checks


def _lane_may_take(consumer: RecordConsumer[Fetcher], partition: int | None) -> bool:
    """This fetcher owns `partition` (placed: not None), and no record of it waits on the
    topic: a task of the local lane never goes before another coordinator's task for the
    same hosts (those go through the topic, in order)."""
    return (
        partition is not None and consumer.owns(partition) and not consumer.has_waiting(partition)
    )


async def _acknowledged(publisher: Publisher, message: Message) -> None:
    """Send `message` and wait until the broker has it."""
    await asyncio.wait_for(await publisher.send(message), publisher.timeout_s)


def _cache_scope(settings: Settings) -> Callable[[PageTask], str]:
    """Where a task's cache entries are kept: one scope for all, or its tenant's."""
    if settings.cache_scope == "tenant":
        return lambda task: tenant_scope(task.request_metadata)
    return lambda _task: ""
