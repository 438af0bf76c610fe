"""Fires the monitors of the requests partitions this coordinator owns: each tick once across
the cluster (see `service/monitors/ticks.py` for the protocol), also after its owner died.

The monitors and ticks topics have the requests topic's partitions; the coordinator owning
requests partition p reads partitions p of both from their start (they are compacted), then
follows them, and looks every `LOOK_S` at what is due."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from service.background import Background
from service.contracts import dump_request, utc_now
from service.contracts_monitors import MonitorTick, PlannedRequest
from service.logs import get_logger
from service.messaging.kafka_config import client_options
from service.messaging.topics import partition_for
from service.monitors.book import Known, MonitorBook
from service.monitors.checks import check_requests
from service.monitors.ticks import Fire, check_id, decide

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from service.messaging.publisher import Publisher
    from service.settings import Settings

log = get_logger(__name__)

LOOK_S: Final = 0.5
"""How often the owner looks for due ticks (and how long one read of the topics waits)."""

SCAN_RECORDS: Final = 500
"""Records per fetch when looking for a half-fired tick's requests."""


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
        self._requests = counts[settings.requests_topic]
        self._results = counts[settings.results_topic]
        self._book = MonitorBook(min_interval=settings.monitor_min_interval)
        self._reader = AIOKafkaConsumer(**client_options(settings), enable_auto_commit=False)
        self._scanner = AIOKafkaConsumer(**client_options(settings), enable_auto_commit=False)
        self._wanted: set[int] = set()
        self._ready: set[int] = set()
        self._ends: dict[TopicPartition, int] = {}
        self._changed = asyncio.Event()
        self._tasks = Background()
        self._timeout_s = settings.kafka_timeout.total_seconds()

    async def __aenter__(self) -> Self:
        await asyncio.wait_for(self._reader.start(), self._timeout_s)
        await asyncio.wait_for(self._scanner.start(), self._timeout_s)
        self._tasks.start(self._loop())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._tasks.cancel()
        for consumer in (self._reader, self._scanner):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), self._timeout_s)

    async def follow(self, partitions: set[int]) -> None:
        """Own the monitors of exactly `partitions` from now on."""
        self._wanted = set(partitions)
        self._changed.set()

    async def _loop(self) -> None:
        while True:
            try:
                if self._changed.is_set():
                    await self._reassign()
                await self._read()
                await self._fire_due()
            except (KafkaError, OSError, TimeoutError) as exc:
                log.warning("monitor.scheduler_failed", error=repr(exc))
                await asyncio.sleep(LOOK_S)
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop's boundary: log with traceback, go on
                log.exception("monitor.scheduler_bug")
                await asyncio.sleep(LOOK_S)

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
        self._reader.assign(kept + new)
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
                    self._book.tick_record(record.key, record.value)
        for p in self._wanted - self._ready:
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
        if isinstance(verdict, Fire):
            await self._fire(known, verdict.scheduled_for)

    async def _fire(self, known: Known, scheduled_for: datetime) -> None:
        """Record the intent (with each request's partition end), then produce, then record
        the tick as produced."""
        check = check_id(known.record.id, scheduled_for)
        requests = check_requests(
            known.record, check, trigger="scheduled", scheduled_for=scheduled_for
        )
        tps = {
            r.request_id: TopicPartition(
                self._settings.requests_topic, partition_for(r.request_id, self._requests)
            )
            for r in requests
        }
        ends = await self._scanner.end_offsets(list(set(tps.values())))
        planned = tuple(
            PlannedRequest(request_id=rid, partition=tp.partition, offset_before=ends[tp])
            for rid, tp in tps.items()
        )
        intent = MonitorTick(
            monitor_id=known.record.id,
            scheduled_for=scheduled_for,
            check_id=check,
            requests=planned,
            fired_at=utc_now(),
        )
        if not self._owns(known.partition):
            return
        await self._record(intent)
        await self._finish(known, intent)

    async def _finish(self, known: Known, tick: MonitorTick) -> None:
        """Produce the requests of `tick` its partitions do not hold yet; mark it produced."""
        found = await self._present(tick.requests)
        requests = check_requests(
            known.record, tick.check_id, trigger="scheduled", scheduled_for=tick.scheduled_for
        )
        missing = [request.request_id for request in requests if request.request_id not in found]
        offsets = await self._results_ends(missing)
        requests = check_requests(
            known.record,
            tick.check_id,
            trigger="scheduled",
            scheduled_for=tick.scheduled_for,
            results_offsets=offsets,
        )
        for request in requests:
            if request.request_id in found:
                continue
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
            resumed=len(found),
        )

    async def _results_ends(self, request_ids: list[str]) -> dict[str, int]:
        """Per request id, the end of its results partition now (where its results start)."""
        tps = {
            rid: TopicPartition(self._settings.results_topic, partition_for(rid, self._results))
            for rid in request_ids
        }
        ends = await self._scanner.end_offsets(list(set(tps.values()))) if tps else {}
        return {rid: ends[tp] for rid, tp in tps.items()}

    async def _record(self, tick: MonitorTick) -> None:
        await self._publisher.send_and_wait(
            self._settings.monitor_ticks_topic,
            tick.monitor_id,
            tick.model_dump_json().encode(),
        )
        self._book.ticks[tick.monitor_id] = tick

    async def _present(self, planned: tuple[PlannedRequest, ...]) -> set[str]:
        """Request ids of `planned` found in their partitions from `offset_before` on."""
        wanted = {p.request_id.encode() for p in planned}
        starts: dict[TopicPartition, int] = {}
        for p in planned:
            tp = TopicPartition(self._settings.requests_topic, p.partition)
            starts[tp] = min(starts.get(tp, p.offset_before), p.offset_before)
        self._scanner.assign(list(starts))
        ends = await self._scanner.end_offsets(list(starts))
        for tp, start in starts.items():
            self._scanner.seek(tp, start)
        found: set[str] = set()
        pending = {tp for tp, start in starts.items() if ends[tp] > start}
        async with asyncio.timeout(self._timeout_s):
            while pending:
                batch = await self._scanner.getmany(timeout_ms=200, max_records=SCAN_RECORDS)
                for records in batch.values():
                    found |= {r.key.decode() for r in records if r.key in wanted}
                for tp in list(pending):
                    if await self._scanner.position(tp) >= ends[tp]:
                        pending.discard(tp)
        return found
