"""Fires the monitors of the requests partitions this coordinator owns: each tick once across
the cluster (see `service/monitors/ticks.py` for the protocol), also after its owner died.

The monitors and ticks topics have the requests topic's partitions; the coordinator owning
requests partition p reads partitions p of both from their start (they are compacted), then
follows them, and looks every `LOOK_S` at what is due."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaConsumer, TopicPartition

from service.contracts import dump_request, utc_now
from service.contracts_monitors import MAX_SKIPPED, MonitorTick, PlannedRequest, SkippedCheck
from service.logs import get_logger
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.polling import PollLoop
from service.monitors.adaptive import Adaptive, TargetPlan, plan_targets
from service.monitors.book import Known, MonitorBook
from service.monitors.checks import check_requests
from service.monitors.signing import signed_skip
from service.monitors.ticks import Fire, check_id, decide, missing, request_id_of
from service.sealing.marker_auth import marker_secret
from service.worker.coordinator.monitor_reads import MonitorReads

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.contracts_monitors import MonitorRecord, MonitorTarget
    from service.messaging.publisher import Publisher
    from service.settings import Settings

log = get_logger(__name__)

LOOK_S: Final = 0.5
"""How often the owner looks for due ticks (and how long one read of the topics waits)."""


class MonitorScheduler:
    """An async context manager: `follow` the owned requests partitions, ticks fire by
    themselves. `owns(p)` is asked right before each write: a partition being revoked fires
    nothing more."""

    def __init__(
        self,
        settings: Settings,
        publisher: Publisher,
        owns: Callable[[int], bool],
        counts: dict[str, int],
    ) -> None:
        self._settings = settings
        self._publisher = publisher
        self._owns = owns
        self._secret = marker_secret(settings)
        """The gateway's marker key: tenants' records are checked with it, checks signed."""
        self._book = MonitorBook(min_interval=settings.monitor_min_interval, secret=self._secret)
        self._reader = AIOKafkaConsumer(**client_options(settings), enable_auto_commit=False)
        self._reads = MonitorReads(settings, counts)
        self._wanted: set[int] = set()
        self._ready: set[int] = set()
        self._ends: dict[TopicPartition, int] = {}
        self._changed = asyncio.Event()
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._looking = PollLoop(self._look, name="monitor", retry_s=LOOK_S)

    async def __aenter__(self) -> Self:
        await asyncio.wait_for(self._reader.start(), self._timeout_s)
        await self._reads.__aenter__()
        self._looking.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._looking.stop()
        with contextlib.suppress(Exception):
            await stop_consumer(self._reader, self._timeout_s)
        await self._reads.__aexit__()

    async def follow(self, partitions: set[int]) -> None:
        """Own the monitors of exactly `partitions` from now on."""
        self._wanted = set(partitions)
        self._changed.set()

    async def _look(self) -> None:
        """One round: apply a change of the partitions owned, read, fire what is due."""
        if self._changed.is_set():
            await self._reassign()
        await self._read()
        await self._fire_due()

    def _topic_partitions(self, partitions: set[int]) -> list[TopicPartition]:
        topics = (self._settings.monitors_topic, self._settings.monitor_ticks_topic)
        return [TopicPartition(topic, p) for topic in topics for p in sorted(partitions)]

    async def _reassign(self) -> None:
        self._changed.clear()
        wanted = set(self._wanted)
        self._book.forget(self._ready - wanted)
        self._ready &= wanted
        fresh = wanted - self._ready
        kept = self._topic_partitions(self._ready)
        new = self._topic_partitions(fresh)
        positions = {tp: await self._reader.position(tp) for tp in kept}
        self._reader.assign(kept + new)
        for tp, offset in positions.items():
            self._reader.seek(tp, offset)  # a new assignment forgets every position
        if new:
            starts = await self._reader.beginning_offsets(new)
            for tp, offset in starts.items():
                self._reader.seek(tp, offset)
            self._ends |= await self._reader.end_offsets(new)

    async def _read(self) -> None:
        if not self._reader.assignment():  # aiokafka would wait for one, past any timeout
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), LOOK_S)
            return
        batch = await self._reader.getmany(timeout_ms=int(LOOK_S * 1000))
        for tp, records in batch.items():
            for record in records:
                if tp.topic == self._settings.monitors_topic:
                    self._book.monitor_record(tp.partition, record.key, record.value)
                else:
                    self._book.tick_record(tp.partition, record.key, record.value)
        assigned = {tp.partition for tp in self._reader.assignment()}
        for p in (assigned & self._wanted) - self._ready:
            tps = self._topic_partitions({p})
            positions = [await self._reader.position(tp) for tp in tps]
            if all(pos >= self._ends.get(tp, 0) for tp, pos in zip(tps, positions, strict=True)):
                self._ready.add(p)
                log.info("monitor.partition_ready", partition=p, monitors=len(self._book.on(p)))

    async def _fire_due(self) -> None:
        now = utc_now()
        for p in sorted(self._ready):
            for known in self._book.on(p):
                if not self._owns(p):
                    break
                await self._consider(known, now)
            for monitor_id in self._book.orphans(p):
                if not self._owns(p):
                    break
                await self._publisher.tombstone(self._settings.monitor_ticks_topic, monitor_id)
                self._book.tick_deleted(monitor_id)
                log.info("monitor.tick_deleted", monitor_id=monitor_id, partition=p)

    async def _consider(self, known: Known, now: datetime) -> None:
        record = known.record
        tick = self._book.ticks.get(record.id)
        if tick is not None and not tick.produced:
            await self._finish(known, tick)  # a predecessor's half-fired tick
            return
        verdict = decide(
            known.schedule,
            since=record.schedule_since,
            last_fired=None if tick is None else tick.scheduled_for,
            now=now,
            paused=record.status == "paused",
        )
        if not isinstance(verdict, Fire):
            return
        if tick is not None and await self._reads.running(tick.requests):
            await self._skip(known, tick, verdict.scheduled_for)
            return
        await self._fire(known, verdict.scheduled_for)

    async def _skip(self, known: Known, previous: MonitorTick, scheduled_for: datetime) -> None:
        """Record tick `scheduled_for` as a `skipped_overlap` check: the previous check
        still runs, so no request is produced (Firecrawl's rule)."""
        record = known.record
        skip = SkippedCheck(
            monitor_id=record.id,
            check_id=check_id(record.id, scheduled_for),
            scheduled_for=scheduled_for,
            at=utc_now(),
            tenant=record.tenant,
        )
        skipped = (*previous.skipped, signed_skip(self._secret, skip))[-MAX_SKIPPED:]
        if not self._owns(known.partition):
            return
        await self._record(
            previous.model_copy(update={"scheduled_for": scheduled_for, "skipped": skipped})
        )
        log.info(
            "monitor.skipped_overlap",
            monitor_id=record.id,
            check_id=skip.check_id,
            scheduled_for=scheduled_for.isoformat(),
            running=previous.check_id,
        )

    async def _fire(self, known: Known, scheduled_for: datetime) -> None:
        """Record the intent (each request's partition ends), produce, record it produced."""
        record, previous = known.record, self._book.ticks.get(known.record.id)
        plan = await self._targets(record, previous, scheduled_for)
        check = check_id(record.id, scheduled_for)
        requests = check_requests(
            record,
            check,
            trigger="scheduled",
            scheduled_for=scheduled_for,
            only=plan.included,
            secret=self._secret,
        )
        ids = [r.request_id for r in requests]
        request_ends = await self._reads.request_ends(ids)
        results_ends = await self._reads.results_ends(ids)
        progress_ends = await self._reads.progress_ends(ids)
        targets = {request_id_of(check, i): t.id for i, t in enumerate(record.targets)}
        planned = tuple(
            PlannedRequest(
                request_id=rid,
                partition=self._reads.request_partition(rid),
                offset_before=request_ends[rid],
                target_id=targets[rid],
                results_offset=results_ends[rid],
                progress_offset=progress_ends[rid],
            )
            for rid in ids
        )
        intent = MonitorTick(
            monitor_id=record.id,
            scheduled_for=scheduled_for,
            check_id=check,
            requests=planned,
            fired_at=utc_now(),
            intervals=plan.intervals,
            checked=plan.checked,
            skipped=() if previous is None else previous.skipped,
        )
        if not self._owns(known.partition):
            return
        await self._record(intent)
        await self._finish(known, intent)

    async def _targets(
        self, record: MonitorRecord, previous: MonitorTick | None, tick: datetime
    ) -> TargetPlan:
        """Every target, but adaptive ones only when their interval has passed (adapted to
        what their previous check found)."""
        rules = [(t.id, _rule(t)) for t in record.targets]
        adaptive = {target_id for target_id, rule in rules if rule is not None}
        changed: dict[str, bool] = {}
        if previous is not None and adaptive:
            read = [p for p in previous.requests if p.target_id in adaptive]
            changed = await self._reads.changed(read)
        return plan_targets(
            rules,
            tick=tick,
            intervals={} if previous is None else previous.intervals,
            checked={} if previous is None else previous.checked,
            changed=changed,
        )

    async def _finish(self, known: Known, tick: MonitorTick) -> None:
        """Produce the requests of `tick` its partitions do not hold yet; mark it produced."""
        found = await self._reads.present(tick.requests)
        absent = {p.request_id for p in missing(tick.requests, found)}
        targets = {p.target_id for p in tick.requests}
        requests = check_requests(
            known.record,
            tick.check_id,
            trigger="scheduled",
            scheduled_for=tick.scheduled_for,
            results_offsets={p.request_id: p.results_offset for p in tick.requests},
            progress_offsets={p.request_id: p.progress_offset for p in tick.requests},
            only=None if "" in targets else targets,
            secret=self._secret,
        )
        requests = [r for r in requests if r.request_id in absent]
        for request in requests:
            if not self._owns(known.partition):
                return
            await self._publisher.send_and_wait(
                self._settings.requests_topic, request.request_id, dump_request(request)
            )
        await self._record(tick.model_copy(update={"produced": True}))
        log.info(
            "monitor.fired",
            monitor_id=known.record.id,
            check_id=tick.check_id,
            scheduled_for=tick.scheduled_for.isoformat(),
            targets=len(tick.requests),
            resumed=len(found),
        )

    async def _record(self, tick: MonitorTick) -> None:
        await self._publisher.send_and_wait(
            self._settings.monitor_ticks_topic,
            tick.monitor_id,
            tick.model_dump_json().encode(),
        )
        self._book.ticks[tick.monitor_id] = tick
        self._book.tick_partitions[tick.monitor_id] = self._reads.tick_partition(tick.monitor_id)


def _rule(target: MonitorTarget) -> Adaptive | None:
    spec = target.adaptive
    if spec is None:
        return None
    return Adaptive(
        minimum=timedelta(seconds=spec.min_interval_s),
        maximum=timedelta(seconds=max(spec.min_interval_s, spec.max_interval_s)),
    )
