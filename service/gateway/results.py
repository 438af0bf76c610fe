"""Reads a job's results from its partition of the results topic, a page at a time, from a
cursor: each call reads forward from where the previous page ended, never the whole job."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, Self

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition

from service.backoff import backoff_s
from service.contracts import PageResult
from service.errors import BrokerUnavailableError
from service.gateway.errors import ApiError
from service.gateway.pacing import SLICES
from service.gateway.paging import PAGE_BYTES, PAGE_DOCUMENTS, Cursor, outside
from service.messaging.chunks import Reassembler
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options

if TYPE_CHECKING:
    from collections.abc import Callable

    from aiokafka.structs import ConsumerRecord

    from service.settings import Settings

log = structlog.get_logger(__name__)

READERS: Final = 4
"""Consumers kept started for page reads (a read takes one; more reads wait)."""

FETCH_RECORDS: Final = 500
"""Records per fetch of a page read."""

FETCH_WAIT_MS: Final = 200
"""Longest wait of one fetch of a page read."""

REPAIR_BASE_S: Final = 0.5
REPAIR_MAX_S: Final = 10.0
"""Backoff of starting a replacement reader while the broker refuses."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """Results of one read and where the next read starts."""

    results: tuple[PageResult, ...]
    next: Cursor
    at_end: bool
    """The read reached the partition's end (as it was when the read started)."""


@dataclass(slots=True)
class _Scan:
    """One read in progress: what it kept, chunks pending and where to resume."""

    key: bytes
    ok_only: bool
    results: list[PageResult]
    chunks: Reassembler
    seen: set[str]
    size: int = 0
    pending_from: int | None = None

    def take(self, record: ConsumerRecord[bytes, bytes]) -> None:
        if record.key != self.key:
            return
        whole = self.chunks.add(record.value, list(record.headers))
        if whole is None:
            self.pending_from = record.offset if self.pending_from is None else self.pending_from
            return
        if self.chunks.pending == 0:
            self.pending_from = None
        result = PageResult.model_validate_json(whole)
        if result.result_id in self.seen or (self.ok_only and not result.ok):
            return
        self.seen.add(result.result_id)
        self.results.append(result)
        self.size += len(whole)

    def full(self) -> bool:
        return self.pending_from is None and (
            len(self.results) >= PAGE_DOCUMENTS or self.size >= PAGE_BYTES
        )


class ResultReader:
    """Page reads of the results topic through a few started consumers. A reader whose read
    fails for any reason other than the caller's request is stopped and replaced; `live` is
    False while one is missing."""

    def __init__(
        self,
        settings: Settings,
        readers: int = READERS,
        new: Callable[[], AIOKafkaConsumer] | None = None,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self._settings = settings
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._idle: asyncio.Queue[AIOKafkaConsumer] = asyncio.Queue()
        self._new = new or self._consumer
        """Makes a reader (a started one is replaced by a new one when its read fails)."""
        self._all = [self._new() for _ in range(readers)]
        self._repairs: set[asyncio.Task[None]] = set()
        self._on_failure = on_failure or (lambda: None)
        """Counts a read that failed and cost its reader."""

    @property
    def live(self) -> bool:
        return not self._repairs

    def _consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            **client_options(self._settings), enable_auto_commit=False, group_id=None
        )

    async def __aenter__(self) -> Self:
        try:
            for consumer in self._all:
                await asyncio.wait_for(consumer.start(), self._timeout_s)
                self._idle.put_nowait(consumer)
        except (TimeoutError, OSError) as exc:
            await self.__aexit__()
            raise BrokerUnavailableError(f"cannot reach Kafka: {exc}") from exc
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for task in self._repairs:
            task.cancel()
        for task in list(self._repairs):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for consumer in self._all:
            await self._stop(consumer)

    async def page(
        self, job_id: str, partition: int, cursor: Cursor, *, start: int = 0, ok_only: bool = True
    ) -> Page:
        """The job's results from `cursor` on: at most a page (100 documents or 10 MB), or
        what is there up to the partition's end; duplicates (a redelivery) dropped. A cursor
        before `start` (the job's first offset) or past the end is a 400."""
        consumer = await self._idle.get()
        try:
            async with asyncio.timeout(self._timeout_s):
                page = await self._read(
                    consumer, job_id, partition, cursor, start=start, ok_only=ok_only
                )
        except (ApiError, asyncio.CancelledError):
            self._idle.put_nowait(consumer)
            raise
        except Exception as exc:  # a loop boundary: any failure costs only this reader
            self._on_failure()
            log.exception("gateway.result_reader_failed", partition=partition)
            self._replace(consumer)
            raise BrokerUnavailableError(f"the results read failed: {exc!r}") from exc
        self._idle.put_nowait(consumer)
        return page

    def _replace(self, broken: AIOKafkaConsumer) -> None:
        task = asyncio.create_task(self._repair(broken), name="gateway-reader-repair")
        self._repairs.add(task)
        task.add_done_callback(self._repairs.discard)

    async def _repair(self, broken: AIOKafkaConsumer) -> None:
        await self._stop(broken)
        self._all.remove(broken)
        failures = 0
        while True:
            fresh = self._new()
            try:
                await asyncio.wait_for(fresh.start(), self._timeout_s)
            except Exception as exc:  # noqa: BLE001 - retried with backoff, logged
                await self._stop(fresh)
                wait_s = backoff_s(failures, base_s=REPAIR_BASE_S, max_s=REPAIR_MAX_S)
                log.warning("gateway.result_reader_restart_failed", error=repr(exc), wait_s=wait_s)
                failures += 1
                await asyncio.sleep(wait_s)
                continue
            self._all.append(fresh)
            self._idle.put_nowait(fresh)
            log.info("gateway.result_reader_replaced")
            return

    async def _stop(self, consumer: AIOKafkaConsumer) -> None:
        with contextlib.suppress(Exception):
            await stop_consumer(consumer, self._timeout_s)

    async def _read(
        self,
        consumer: AIOKafkaConsumer,
        job_id: str,
        partition: int,
        cursor: Cursor,
        *,
        start: int,
        ok_only: bool,
    ) -> Page:
        tp = TopicPartition(self._settings.results_topic, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        if not start <= cursor.offset <= end:
            raise outside(cursor.offset)
        consumer.seek(tp, cursor.offset)
        scan = _Scan(job_id.encode(), ok_only, [], Reassembler(), set())
        resume = await self._scan(consumer, tp, end, scan)
        results = tuple(scan.results)
        following = Cursor(offset=resume, returned=cursor.returned + len(results))
        return Page(results=results, next=following, at_end=resume >= end)

    @staticmethod
    async def _scan(consumer: AIOKafkaConsumer, tp: TopicPartition, end: int, scan: _Scan) -> int:
        """Read until the page is full or the end; the offset the next read starts at."""
        position = int(await consumer.position(tp))
        while position < end:
            batch = await consumer.getmany(tp, timeout_ms=FETCH_WAIT_MS, max_records=FETCH_RECORDS)
            records = batch.get(tp, [])
            position, full = await SLICES.run(partial(_taken, records, scan, end, position))
            if full:
                return position
            if not batch:
                position = max(position, int(await consumer.position(tp)))
        return position if scan.pending_from is None else int(scan.pending_from)


def _taken(
    records: list[ConsumerRecord[bytes, bytes]], scan: _Scan, end: int, position: int
) -> tuple[int, bool]:
    """A fetched batch decoded into `scan` (one of the loop's heavy slices: up to 1 MB of
    results validated): where the read is now, and whether the page is full."""
    for record in records:
        if record.offset >= end:
            break
        scan.take(record)
        position = int(record.offset) + 1
        if scan.full():
            return position, True
    return position, False
