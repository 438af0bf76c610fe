"""A group consumer with concurrent handling, per-partition commits, pause without leaving.

Two run in a worker: the coordinators' consumer of the requests topic and the fetchers'
consumer of the pages topic (`RecordConsumer` with a `ConsumerSpec` each). A consumer builds
its handler (`handler_for`) once it is whole, and hands it itself for the delivery counts
(`charge`, `relieve`): the two are built in order, neither waits for the other.

Records are handled concurrently, also within a partition. A partition's offset is committed
up to its oldest unfinished record, with what is done above it and how often each unfinished
record was delivered in the commit's metadata (see `OffsetTracker`). A record's delivery is
committed before it runs, so a record that kills its worker is counted even though the worker
dies. A partition without room (the worker full, the partition read too far ahead, the memory
gate saying pause) is held: not read, its records fetched ahead kept; held for `HOLD_S` it is
paused in the client, never unsubscribed: the consumer keeps polling and stays in its group.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from service.background import Background, awaiting_at, unless_set
from service.logs import get_logger
from service.messaging._assignor import learn_generation, sticky_assignor
from service.messaging.closing import stop_consumer
from service.messaging.consumer_spec import ConsumerSpec, RecordHandler
from service.messaging.holds import HOLD_S, Holds
from service.messaging.kafka_config import client_options
from service.messaging.lag import forget_lag, update_lag
from service.messaging.offsets import OffsetTracker, Verdict, committed_with_metadata
from service.messaging.polling import IDLE_POLL_MS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from aiokafka import ConsumerRecord

    from service.messaging.offsets import Delivery
    from service.metrics import Metrics
    from service.settings import Settings

log = get_logger(__name__)

POLL_TIMEOUT_MS: Final = IDLE_POLL_MS
"""How long one poll waits for records while no partition is held. Records that come end it
at once; what it bounds is how quickly a stop takes effect, and how often an idle consumer
wakes up (see `IDLE_POLL_MS`)."""

HELD_POLL_S: Final = 0.02
"""While a partition is held, how long one poll (or wait for room) lasts: room that opens (a
record done, a shorter backlog) is seen within this, not after a whole `POLL_TIMEOUT_MS`."""

CHARGE_FIRST_BYTES: Final = 64 * 1024
"""A record charged when taken (`charge_on_delivery`) that is this large has its delivery
committed before it runs; a smaller one beside its first steps. Parsing and planning a
record under 64 KiB allocates a few MiB at most, so that cannot be what kills a worker;
rendering can, and a render's hurtful part comes long after the commit's round trip (as a
page record's charge, `charge`). So the commit, 6-12 ms on Kafka 4 (its group coordinator
holds a commit up to `group.coordinator.append.linger.ms`, 5 ms, to batch it), is not in a
1-URL request's path."""

COMMIT_INTERVAL_S: Final = 1.0
"""How often finished offsets are committed."""

REVOKE_GRACE_S: Final = 5.0
"""On rebalance, how long revoked partitions' requests may take to finish and be committed
(while shutting down, the rest of `CRAWL_SHUTDOWN_GRACE` applies instead)."""

CANCEL_GRACE_S: Final = 15.0
"""How long cancelled work may take to end (a page's browser close takes up to 10 s) before a
rebalance goes on without it: a rebalance callback that waits on it unbounded keeps the
member from ever consuming its new partitions. Work still running then is logged with where
it waits and left to end on its own (its partition's ownership is withdrawn: it publishes
nothing)."""

READY_CHECK_S: Final = 3.0
"""Deadline of the readiness probe's metadata request."""

LAG_INTERVAL_S: Final = 5.0
"""How often consumer lag is refreshed for the metrics."""


H = TypeVar("H", bound=RecordHandler)


class RecordConsumer(Generic[H]):
    """Feeds records to its `handler`, commits what is done, and applies backpressure."""

    def __init__(
        self,
        settings: Settings,
        handler_for: Callable[[RecordConsumer[H]], H],
        metrics: Metrics,
        *,
        spec: ConsumerSpec,
        should_pause: Callable[[], bool] = lambda: False,
        intake_room: Callable[[], int] | None = None,
        client: Callable[..., AIOKafkaConsumer] = AIOKafkaConsumer,
    ) -> None:
        """`handler_for` builds the handler, given this consumer (whole by then);
        `client` makes the Kafka consumer from its options (a test's stands in)."""
        self._settings = settings
        self._spec = spec
        self._metrics = metrics
        self._should_pause = should_pause
        self._intake_room = intake_room
        self._tracker = OffsetTracker(settings.max_deliveries)
        self._charges = 0
        self._committing = asyncio.Lock()
        self._beside = Background()
        self._ending: set[asyncio.Task[Any]] = set()
        """Cancelled work that outlived `CANCEL_GRACE_S` (`_cancel`), waited for at the stop."""
        """Charge commits of small records, running beside them (`CHARGE_FIRST_BYTES`)."""
        self._charges_committed = 0
        self._charging = asyncio.Lock()
        self._events = {
            kind: f"{self._spec.name}.{kind}" for kind in ("skipped", "refetched", "dropped")
        }
        self._aside: dict[TopicPartition, set[int]] = {}
        """Records set aside by their handler (pages waiting for their host's pace): read
        past, and up to `CRAWL_MAX_PACED_PAGES` not counted as in flight (`set_aside`)."""
        self._tasks: dict[TopicPartition, set[asyncio.Task[None]]] = {}
        self._owned: dict[TopicPartition, asyncio.Event] = {}
        """Set while this worker owns the partition: runs publish only then."""
        self._stopping = asyncio.Event()
        self._drain_deadline: float | None = None
        self._paused_all = False
        self._holds = Holds(HOLD_S)
        self._room = asyncio.Event()
        """Set when a record ends: a held partition may have room again."""
        self._settled = asyncio.Event()
        self._settled.set()
        """Clear while a new assignment is being applied (`on_assigned`): aiokafka hands out
        records of the new partitions meanwhile, before their offsets are restored here."""
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._assignor = sticky_assignor()
        """Sticky: a rebalance moves as few partitions as it can, and work of partitions that
        stay goes on. The only one offered (see `_assignor`)."""
        self._consumer = client(
            **client_options(settings),
            group_id=self._spec.group_id,
            group_instance_id=settings.group_instance_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=int(settings.max_request_bytes) + 65_536,
            fetch_max_bytes=max(int(settings.max_request_bytes) * 4, 52_428_800),
            session_timeout_ms=30_000,
            heartbeat_interval_ms=3_000,
            max_poll_interval_ms=300_000,
            partition_assignment_strategy=(self._assignor,),
        )
        self.handler: H = handler_for(self)
        """The handler of this consumer's records, built last."""

    @property
    def in_flight(self) -> int:
        return sum(len(tasks) for tasks in self._tasks.values())

    def owns(self, partition: int) -> bool:
        """This consumer owns `partition` of its topic now (assigned, not being revoked)."""
        tp = TopicPartition(self._spec.topic, partition)
        owned = self._owned.get(tp)
        return (
            not self._stopping.is_set()
            and tp in self._consumer.assignment()
            and (owned is None or owned.is_set())
        )

    def has_waiting(self, partition: int) -> bool:
        """Records of `partition` are on the topic and not yet taken here (as far as the
        last fetch response told: its high watermark)."""
        tp = TopicPartition(self._spec.topic, partition)
        highwater: int | None = self._consumer.highwater(tp)
        if highwater is None:
            return False
        taken = self._tracker.next_offset(tp)
        if taken is None:
            taken = self._tracker.committed_position(tp) or 0
        return highwater > taken

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

    async def charge(self, record: ConsumerRecord[bytes, bytes], *, alone: bool = True) -> None:
        """Count this delivery against `record` (not `alone`: mark it a suspect, should the
        worker die); return once the broker has the count (a death right after is counted).
        Charges that come together share one commit."""
        tp = TopicPartition(record.topic, record.partition)
        self._tracker.charge(tp, record.offset, alone=alone)
        self._charges += 1
        mine = self._charges
        async with self._charging:
            if self._charges_committed >= mine:
                return  # a commit that began after this charge has it
            upto = self._charges
            await self._commit(self._consumer.assignment())
            self._charges_committed = upto

    def set_aside(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """`record` waits for time only (its host's pace): the partition is read past it,
        and it counts against `CRAWL_MAX_PACED_PAGES` instead of the records in flight. It
        stays unfinished (uncommitted) until its handler ends."""
        tp = TopicPartition(record.topic, record.partition)
        self._aside.setdefault(tp, set()).add(record.offset)
        self._room.set()

    def taken_back(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """`record` is work again (its turn came): it counts as in flight."""
        tp = TopicPartition(record.topic, record.partition)
        aside = self._aside.get(tp)
        if aside is not None:
            aside.discard(record.offset)
            if not aside:
                del self._aside[tp]

    @property
    def aside(self) -> int:
        """Records set aside now."""
        return sum(len(offsets) for offsets in self._aside.values())

    def relieve(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """Stop counting this delivery against `record`: what is left cannot kill the worker
        (committed with the next periodic commit: a death before it over-counts, never
        under-counts)."""
        self._tracker.relieve(TopicPartition(record.topic, record.partition), record.offset)

    async def relieved(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """`relieve`, and return once the broker has the new count (a death right after
        must not be charged to `record`)."""
        tp = TopicPartition(record.topic, record.partition)
        self._tracker.relieve(tp, record.offset)
        await self._commit({tp})

    async def run(self) -> None:
        """Consume until `stop()`; then finish or hand back in-flight work and commit."""
        await asyncio.wait_for(self._consumer.start(), self._timeout_s)
        self._consumer.subscribe([self._spec.topic], listener=_Rebalance(self))
        try:
            await self._loop()
            await self._drain(self._settings.shutdown_grace.total_seconds())
        finally:
            await self._cancel(list(self._tasks))
            if self._ending:
                await asyncio.wait(self._ending, timeout=CANCEL_GRACE_S)
            await self._beside.wait()  # each is bounded by the commit's own deadline
            await stop_consumer(self._consumer, self._timeout_s)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_commit = next_lag = loop.time()
        while not self._stopping.is_set():
            room = self._fetch_room()
            held = self._apply_backpressure(room)
            readable = self._consumer.assignment() - held
            if room > 0 and (readable or not held):
                wait_ms = POLL_TIMEOUT_MS if not held else int(HELD_POLL_S * 1000)
                batch = await self._poll(*readable, timeout_ms=wait_ms, max_records=room)
                self._metrics.last_poll.set(time.time())
                if self._settled.is_set():
                    await self._take(batch)
                else:
                    await self._rewind(batch)
            elif (
                held - self._consumer.paused()
            ):  # held briefly: wait for room, keep what is fetched
                self._room.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._room.wait(), HELD_POLL_S)
            else:  # all paused in the client: poll, so the group sees this member alive
                batch = await self._poll(timeout_ms=int(HELD_POLL_S * 1000))
                self._metrics.last_poll.set(time.time())
                await self._rewind(batch)  # a new assignment's partitions are not paused yet
            if loop.time() >= next_commit:
                await self._commit(self._consumer.assignment())
                next_commit = loop.time() + COMMIT_INTERVAL_S
            if loop.time() >= next_lag:
                await update_lag(self._consumer, self._tracker, self._spec.lag, READY_CHECK_S)
                next_lag = loop.time() + LAG_INTERVAL_S

    def _fetch_room(self) -> int:
        """Records one poll may bring in: records in flight and the local page backlog allow."""
        counted = self.in_flight - min(self.aside, self._settings.max_paced_pages)
        room = self._spec.max_in_flight - counted
        if self._intake_room is not None:
            room = min(room, self._intake_room())
        return room

    async def _rewind(
        self, batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]
    ) -> None:
        """Records handed out while an assignment was applied, or while all was to stay
        paused, are read again (docs/decisions/rewind-on-rebalance.md)."""
        if not any(batch.values()):
            return
        if not await self._settled_or_stopping():
            return  # stopping: nothing more is read here, the records stay for the next owner
        assigned = self._consumer.assignment()
        for tp, records in batch.items():
            if tp not in assigned or not records:
                continue
            position = self._tracker.next_offset(tp)
            if position is None:
                position = self._tracker.committed_position(tp)
            if position is None:
                position = min(record.offset for record in records)
            self._consumer.seek(tp, position)
            log.info(
                "consumer.rewound",
                consumer=self._spec.name,
                partition=tp.partition,
                records=len(records),
                position=position,
            )

    async def _settled_or_stopping(self) -> bool:
        """Wait until the assignment being applied is (True), or the consumer stops (False):
        a listener stuck on an unreachable broker must not keep a stop from taking effect."""
        if not self._settled.is_set():
            await unless_set(self._stopping, self._settled.wait())
        return self._settled.is_set()

    async def _poll(
        self, *partitions: TopicPartition, timeout_ms: int, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        """`getmany`, or nothing once the consumer stops: during a rebalance aiokafka's poll
        waits for the new assignment whatever its timeout, and with the broker gone that
        assignment never comes."""
        polled = self._consumer.getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)
        batch = await unless_set(self._stopping, polled)
        return {} if batch is None else batch

    async def _take(self, batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]) -> None:
        """Record each delivery durably (one commit for the batch), then start the records."""
        started = []
        for tp, records in batch.items():
            for record in records:
                delivery = self._tracker.delivered(
                    tp, record.offset, charge=self._spec.charge_on_delivery
                )
                if delivery.verdict is Verdict.SKIP:
                    self._spec.skipped.inc()
                    log.info(self._events["skipped"], partition=tp.partition, offset=record.offset)
                elif delivery.verdict is Verdict.RUNNING:
                    log.info(
                        self._events["refetched"], partition=tp.partition, offset=record.offset
                    )
                else:
                    started.append((tp, record, delivery))
        if started and self._spec.charge_on_delivery:  # else charged later, when it matters
            partitions = {tp for tp, _, _ in started}
            if all(len(record.value or b"") < CHARGE_FIRST_BYTES for _, record, _ in started):
                self._beside.start(self._commit(partitions))
            else:
                await self._commit(partitions)
        for tp, record, delivery in started:
            task = asyncio.create_task(self._handle(tp, record, delivery))
            self._tasks.setdefault(tp, set()).add(task)
        if started:
            await asyncio.sleep(0)  # let them parse and count their pages before the next poll
        self._count_requests()

    async def _handle(
        self, tp: TopicPartition, record: ConsumerRecord[bytes, bytes], delivery: Delivery
    ) -> None:
        try:
            with structlog.contextvars.bound_contextvars(
                partition=tp.partition, offset=record.offset, delivery=delivery.count
            ):
                await self.handler.handle(record, delivery, self._ownership(tp))
        except Exception:  # last resort: the handler ends every record itself, even on error
            log.exception(self._events["dropped"], partition=tp.partition, offset=record.offset)
            if self._spec.name == "request":
                self._metrics.requests.labels("dropped").inc()
        finally:
            task = asyncio.current_task()
            if not (task is not None and task.cancelling()):
                self._tracker.finished(tp, record.offset)
            self._tasks.get(tp, set()).discard(task)
            self.taken_back(record)
            self._count_requests()
            self._room.set()

    def _count_requests(self) -> None:
        self._spec.in_flight.set(self.in_flight)

    def _ownership(self, tp: TopicPartition) -> asyncio.Event:
        owned = self._owned.get(tp)
        if owned is None:
            owned = self._owned[tp] = asyncio.Event()
            owned.set()
        return owned

    def _apply_backpressure(self, room: int) -> set[TopicPartition]:
        """The partitions not to read now (all when there is no `room` or the gate says
        pause; those read too far ahead of their oldest unfinished record); those held for
        `HOLD_S` are paused in the client, the others resumed."""
        assigned = self._consumer.assignment()
        full = room <= 0  # `_fetch_room` is no more than the in-flight bound leaves
        gate_pauses = self._should_pause()  # asked each time: it keeps its own hysteresis
        pause_all = full or gate_pauses
        limit = self._spec.run_ahead
        held = {
            tp
            for tp in assigned
            if pause_all
            or self._tracker.run_ahead(tp, self._aside_of(tp)) >= limit
            or self.handler.full(tp.partition)
        }
        if self._spec.held is not None:
            self._spec.held.set(len(held))
        wanted = self._holds.update(held)
        paused = self._consumer.paused()
        if wanted - paused:
            self._consumer.pause(*(wanted - paused))
        if paused - wanted:
            self._consumer.resume(*(paused - wanted))
        if pause_all != self._paused_all:
            self._paused_all = pause_all
            self._spec.paused.set(int(pause_all))
            if pause_all:
                self._spec.pauses.inc()
            log.info(
                "consumer.paused" if pause_all else "consumer.resumed",
                consumer=self._spec.name,
                records_in_flight=self.in_flight,
                full=full,
            )
        return held

    def _aside_of(self, tp: TopicPartition) -> set[int]:
        """`tp`'s records set aside, while they are within `CRAWL_MAX_PACED_PAGES`."""
        if self.aside > self._settings.max_paced_pages:
            return set()
        return self._aside.get(tp, set())

    async def _commit(
        self, partitions: Iterable[TopicPartition], *, handing_back: bool = False
    ) -> None:
        # One at a time, each with the state when it is sent: a commit that overtook an
        # earlier one (retried after a coordinator error) must not be overwritten by it (a
        # small record's charge, sent beside it, landing after its relief).
        async with self._committing:
            commits = self._tracker.to_commit(partitions, handing_back=handing_back)
            if not commits:
                return
            try:
                await asyncio.wait_for(self._consumer.commit(commits), self._timeout_s)
            except (CommitFailedError, KafkaError, TimeoutError) as exc:
                log.warning("consumer.commit_failed", error=repr(exc))
                return
            self._tracker.committed(commits)
        self._metrics.commits.inc()
        log.debug("consumer.committed", positions={str(tp): c[0] for tp, c in commits.items()})

    async def _drain(self, grace_s: float) -> None:
        """Let in-flight requests finish within `grace_s`, committing as they finish."""
        self._drain_deadline = asyncio.get_running_loop().time() + grace_s
        if self.in_flight:
            log.info(
                "consumer.draining",
                consumer=self._spec.name,
                records=self.in_flight,
                grace_s=grace_s,
            )
        await self._settle(set(self._tasks), self._drain_deadline)

    async def _settle(self, partitions: set[TopicPartition], deadline: float) -> None:
        """Wait until `partitions`' work is done or `deadline`; commit as work finishes.

        Whatever is still running then is committed as handed back (not counted as a failed
        delivery) and left to the caller to cancel.
        """
        loop = asyncio.get_running_loop()
        while True:
            tasks = {task for tp in partitions for task in self._tasks.get(tp, set())}
            remaining = deadline - loop.time()
            if not tasks or remaining <= 0:
                break
            await asyncio.wait(tasks, timeout=min(remaining, COMMIT_INTERVAL_S))
            await self._commit(partitions & self._consumer.assignment())
        await self._commit(partitions & self._consumer.assignment(), handing_back=True)

    async def _cancel(self, partitions: list[TopicPartition]) -> None:
        """Cancel unfinished work of `partitions`: it stays uncommitted for the next owner.
        Waits `CANCEL_GRACE_S` at most for it to end."""
        tasks = [task for tp in partitions for task in self._tasks.pop(tp, set())]
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=CANCEL_GRACE_S)
        for task in tasks:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: each record's own boundary has logged it
        log.info("consumer.handed_back", consumer=self._spec.name, records=len(tasks))
        if late:
            self._ending.update(late)
            log.warning(
                "consumer.cancel_slow",
                consumer=self._spec.name,
                records=len(late),
                grace_s=CANCEL_GRACE_S,
                waiting_at=awaiting_at(next(iter(late))),
            )

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Finish and commit what can be finished in time; hold the rest until the new
        assignment says whether its partition stays here (it goes on) or moves (dropped).

        Held runs go on rendering but publish nothing until then, so a run whose partition
        moves stops without a terminal event and the new owner's run is the only one.
        """
        loop = asyncio.get_running_loop()
        deadline = self._drain_deadline or loop.time() + REVOKE_GRACE_S
        await self._settle(revoked, deadline)
        for tp in revoked:
            self._ownership(tp).clear()
        forget_lag(self._spec.lag, revoked)
        log.info(
            "consumer.revoked",
            consumer=self._spec.name,
            partitions=sorted(tp.partition for tp in revoked),
        )

    async def on_assigned(self, assigned: set[TopicPartition]) -> None:
        """Partitions that came back unchanged (nobody committed them since we did) go on
        where they were; the others start from their committed position and metadata (done
        offsets above it are skipped, delivery counts go on). Held work of partitions that
        moved away is dropped uncommitted. Records handed out meanwhile are read again
        (`_rewind`)."""
        self._settled.clear()
        try:
            await self._apply_assignment(assigned)
        finally:
            self._settled.set()

    async def _apply_assignment(self, assigned: set[TopicPartition]) -> None:
        self._spec.rebalances.inc()
        generation = self._consumer._coordinator.generation  # noqa: SLF001  # no public call
        learn_generation(self._assignor, generation)
        committed = await committed_with_metadata(self._consumer, assigned, self._timeout_s)
        kept = {
            tp
            for tp in assigned
            if self._tracker.next_offset(tp) is not None
            and committed[tp][0] == self._tracker.committed_position(tp)
        }
        await self._cancel([tp for tp in self._tasks if tp not in kept])
        self._tracker.forget(self._tracker.partitions() - kept)
        self._aside = {tp: offsets for tp, offsets in self._aside.items() if tp in kept}
        for tp in kept:
            self._consumer.seek(tp, self._tracker.next_offset(tp))
        for tp in assigned - kept:
            self._tracker.restore(tp, *committed[tp])
        for tp in set(self._owned) - assigned:
            del self._owned[tp]
        if self._spec.on_assigned is not None:
            await self._spec.on_assigned(set(assigned))
        for tp in assigned:
            self._ownership(tp).set()
        log.info(
            "consumer.assigned",
            consumer=self._spec.name,
            partitions=sorted(tp.partition for tp in assigned),
            kept=sorted(tp.partition for tp in kept),
            generation=generation,
        )
        if self._stopping.is_set():
            self._consumer.pause(*assigned)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, consumer: RecordConsumer[Any]) -> None:
        self._consumer = consumer

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._consumer.on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self._consumer.on_assigned(set(assigned))
