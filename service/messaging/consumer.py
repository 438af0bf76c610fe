"""The requests consumer: concurrent handling, per-partition commits, pause without leaving.

Records are handled concurrently, also within a partition. A partition's offset is committed
up to its oldest unfinished record (see `OffsetTracker`). Partitions are paused, never
unsubscribed, when the worker is full: the consumer keeps polling and stays in its group.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import CommitFailedError, KafkaError

from service.logs import get_logger
from service.messaging.kafka_config import client_options
from service.messaging.offsets import OffsetTracker

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from aiokafka import ConsumerRecord, TopicPartition

    from service.metrics import Metrics
    from service.settings import Settings

    Handler = Callable[[ConsumerRecord[bytes, bytes]], Awaitable[None]]

log = get_logger(__name__)

POLL_TIMEOUT_MS: Final = 200
"""How long one poll waits for records; bounds how quickly pauses and stops take effect."""

COMMIT_INTERVAL_S: Final = 1.0
"""How often finished offsets are committed."""

REVOKE_GRACE_S: Final = 5.0
"""On rebalance, how long revoked partitions' requests may take to finish and be committed."""

READY_CHECK_S: Final = 3.0
"""Deadline of the readiness probe's metadata request."""

LAG_INTERVAL_S: Final = 10.0
"""How often consumer lag is refreshed for the metrics."""


class RequestConsumer:
    """Feeds request records to `handler`, commits what is done, and applies backpressure."""

    def __init__(
        self,
        settings: Settings,
        handler: Handler,
        metrics: Metrics,
        should_pause: Callable[[], bool] = lambda: False,
    ) -> None:
        self._settings = settings
        self._handler = handler
        self._metrics = metrics
        self._should_pause = should_pause
        self._tracker = OffsetTracker()
        self._tasks: dict[TopicPartition, set[asyncio.Task[None]]] = {}
        self._stopping = asyncio.Event()
        self._paused_all = False
        self._consumer = AIOKafkaConsumer(
            **client_options(settings),
            group_id=settings.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=int(settings.max_request_bytes) + 65_536,
            fetch_max_bytes=max(int(settings.max_request_bytes) * 4, 52_428_800),
            session_timeout_ms=30_000,
            heartbeat_interval_ms=3_000,
            max_poll_interval_ms=300_000,
        )

    @property
    def in_flight(self) -> int:
        return sum(len(tasks) for tasks in self._tasks.values())

    async def broker_reachable(self) -> bool:
        """Metadata can be fetched from the cluster now (for `/readyz`)."""
        try:
            await asyncio.wait_for(self._consumer.topics(), READY_CHECK_S)
        except (KafkaError, TimeoutError):
            return False
        return True

    def stop(self) -> None:
        """Stop taking new records; `run` then drains and returns."""
        self._stopping.set()

    async def run(self) -> None:
        """Consume until `stop()`; then finish or hand back in-flight work and commit."""
        timeout_s = self._settings.kafka_timeout.total_seconds()
        await asyncio.wait_for(self._consumer.start(), timeout_s)
        self._consumer.subscribe([self._settings.requests_topic], listener=_Rebalance(self))
        try:
            await self._loop()
            await self._drain(self._settings.shutdown_grace.total_seconds())
        finally:
            await self._cancel(list(self._tasks))
            await asyncio.wait_for(self._consumer.stop(), timeout_s)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_commit = next_lag = loop.time()
        while not self._stopping.is_set():
            self._apply_backpressure()
            room = self._settings.max_requests_in_flight - self.in_flight
            batch = await self._consumer.getmany(
                timeout_ms=POLL_TIMEOUT_MS, max_records=max(room, 1)
            )
            for tp, records in batch.items():
                for record in records:
                    self._start(tp, record)
            if loop.time() >= next_commit:
                await self._commit(self._consumer.assignment())
                next_commit = loop.time() + COMMIT_INTERVAL_S
            if loop.time() >= next_lag:
                await self._update_lag()
                next_lag = loop.time() + LAG_INTERVAL_S

    def _start(self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> None:
        self._tracker.started(tp, record.offset)
        task = asyncio.create_task(self._handle(tp, record))
        self._tasks.setdefault(tp, set()).add(task)
        self._metrics.requests_in_flight.set(self.in_flight)

    async def _handle(self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes]) -> None:
        try:
            with structlog.contextvars.bound_contextvars(
                partition=tp.partition, offset=record.offset
            ):
                await self._handler(record)
            self._tracker.finished(tp, record.offset)
        except Exception:  # loop boundary: the offset stays uncommitted, the worker goes on
            log.exception("request.crashed", partition=tp.partition, offset=record.offset)
            self._metrics.requests.labels("crashed").inc()
        finally:
            task = asyncio.current_task()
            self._tasks.get(tp, set()).discard(task)
            self._metrics.requests_in_flight.set(self.in_flight)

    def _apply_backpressure(self) -> None:
        assigned = self._consumer.assignment()
        full = self.in_flight >= self._settings.max_requests_in_flight
        pause_all = full or self._should_pause()
        limit = self._settings.max_partition_run_ahead
        wanted = {tp for tp in assigned if pause_all or self._tracker.run_ahead(tp) >= limit}
        paused = self._consumer.paused()
        if wanted - paused:
            self._consumer.pause(*(wanted - paused))
        if paused - wanted:
            self._consumer.resume(*(paused - wanted))
        if pause_all != self._paused_all:
            self._paused_all = pause_all
            self._metrics.paused.set(int(pause_all))
            if pause_all:
                self._metrics.pauses.inc()
            log.info(
                "consumer.paused" if pause_all else "consumer.resumed",
                requests_in_flight=self.in_flight,
                full=full,
            )

    async def _commit(self, partitions: set[TopicPartition]) -> None:
        positions = self._tracker.to_commit(partitions)
        if not positions:
            return
        try:
            await asyncio.wait_for(
                self._consumer.commit(positions), self._settings.kafka_timeout.total_seconds()
            )
        except (CommitFailedError, KafkaError, TimeoutError) as exc:
            log.warning("consumer.commit_failed", error=repr(exc))
            return
        self._tracker.committed(positions)
        self._metrics.commits.inc()
        log.debug("consumer.committed", positions={str(tp): o for tp, o in positions.items()})

    async def _update_lag(self) -> None:
        for tp in self._consumer.assignment():
            with contextlib.suppress(KafkaError, AssertionError):
                highwater = self._consumer.highwater(tp)
                position = await self._consumer.position(tp)
                if highwater is not None:
                    self._metrics.consumer_lag.labels(str(tp.partition)).set(highwater - position)

    async def _drain(self, grace_s: float) -> None:
        """Let in-flight requests finish within `grace_s`, then commit what is done."""
        tasks = {task for tasks in self._tasks.values() for task in tasks}
        if tasks:
            log.info("consumer.draining", requests=len(tasks), grace_s=grace_s)
            await asyncio.wait(tasks, timeout=grace_s)
        await self._commit(self._consumer.assignment())

    async def _cancel(self, partitions: list[TopicPartition]) -> None:
        """Cancel unfinished work of `partitions`: it stays uncommitted for the next owner."""
        tasks = [task for tp in partitions for task in self._tasks.pop(tp, set())]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if tasks:
            log.info("consumer.handed_back", requests=len(tasks))

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        tasks = {task for tp in revoked for task in self._tasks.get(tp, set())}
        if tasks:
            await asyncio.wait(tasks, timeout=REVOKE_GRACE_S)
        await self._commit(revoked)
        await self._cancel(list(revoked))
        self._tracker.forget(revoked)
        log.info("consumer.revoked", partitions=sorted(tp.partition for tp in revoked))


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, consumer: RequestConsumer) -> None:
        self._consumer = consumer

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._consumer.on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        log.info("consumer.assigned", partitions=sorted(tp.partition for tp in assigned))
