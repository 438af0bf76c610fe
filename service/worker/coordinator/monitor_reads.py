"""What the monitor scheduler reads besides its two topics: whether a half-fired tick's
requests are on the requests topic, where results partitions end, and what an adaptive
target's previous check found. One group-less consumer, used one read at a time."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from service.contracts import PageResult, ProgressEvent
from service.messaging.chunks import Reassembler
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.topics import partition_for
from service.monitors.summary import page_status

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from service.contracts_monitors import PlannedRequest
    from service.settings import Settings

SCAN_RECORDS: Final = 500
"""Records per fetch of a scan."""

SCAN_WAIT_MS: Final = 200

Scanned = tuple[bytes | None, bytes, list[tuple[str, bytes]]]
"""A record's key, value and headers."""

CHANGES: Final = frozenset({"new", "changed", "removed"})
"""Page statuses that count as a change for an adaptive interval."""


class MonitorReads:
    def __init__(self, settings: Settings, counts: dict[str, int]) -> None:
        self._settings = settings
        self._requests = counts[settings.requests_topic]
        self._results = counts[settings.results_topic]
        self._progress = counts[settings.progress_topic]
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._consumer = AIOKafkaConsumer(**client_options(settings), enable_auto_commit=False)

    async def __aenter__(self) -> Self:
        await asyncio.wait_for(self._consumer.start(), self._timeout_s)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with contextlib.suppress(Exception):
            await stop_consumer(self._consumer, self._timeout_s)

    def tick_partition(self, monitor_id: str) -> int:
        """The ticks topic's partition of a monitor's tick record (the requests topic's
        count, keyed by monitor id)."""
        return partition_for(monitor_id, self._requests)

    def request_partition(self, request_id: str) -> int:
        return partition_for(request_id, self._requests)

    async def request_ends(self, request_ids: Collection[str]) -> dict[str, int]:
        """Per request id, the end of its requests partition now."""
        return await self._ends(self._settings.requests_topic, self._requests, request_ids)

    async def results_ends(self, request_ids: Collection[str]) -> dict[str, int]:
        """Per request id, the end of its results partition now (where its results start)."""
        return await self._ends(self._settings.results_topic, self._results, request_ids)

    async def progress_ends(self, request_ids: Collection[str]) -> dict[str, int]:
        """Per request id, the end of its progress partition now (where its events start)."""
        return await self._ends(self._settings.progress_topic, self._progress, request_ids)

    async def _ends(self, topic: str, count: int, ids: Collection[str]) -> dict[str, int]:
        tps = {rid: TopicPartition(topic, partition_for(rid, count)) for rid in ids}
        ends = await self._consumer.end_offsets(list(set(tps.values()))) if tps else {}
        return {rid: ends[tp] for rid, tp in tps.items()}

    async def present(self, planned: Collection[PlannedRequest]) -> set[str]:
        """Request ids of `planned` found in their partitions from `offset_before` on."""
        topic = self._settings.requests_topic
        starts = {
            (p.request_id, TopicPartition(topic, p.partition)): p.offset_before for p in planned
        }
        found: set[str] = set()
        for (request_id, tp), start in starts.items():
            for record in await self._scan(tp, start):
                if record[0] == request_id.encode():
                    found.add(request_id)
        return found

    async def running(self, planned: Collection[PlannedRequest]) -> bool:
        """Whether a request of `planned` has no terminal event yet (its check still runs).
        Each partition is read from the request's first event on, only until its end is
        found (a check ends long before the next tick, as a rule)."""
        topic = self._settings.progress_topic
        for p in planned:
            tp = TopicPartition(topic, partition_for(p.request_id, self._progress))
            key = p.request_id.encode()

            def ends(record_key: bytes | None, value: bytes, key: bytes = key) -> bool:
                if record_key != key:
                    return False
                try:
                    return ProgressEvent.model_validate_json(value).is_terminal
                except (ValidationError, ValueError):
                    return False

            if not await self._scan(tp, p.progress_offset, until=ends):
                return True
        return False

    async def changed(self, planned: Collection[PlannedRequest]) -> dict[str, bool]:
        """Per target of `planned`: whether its request's results so far hold a change."""
        topic = self._settings.results_topic
        outcome: dict[str, bool] = {}
        for p in planned:
            tp = TopicPartition(topic, partition_for(p.request_id, self._results))
            chunks, key, seen = Reassembler(), p.request_id.encode(), False
            for record_key, value, headers in await self._scan(tp, p.results_offset):
                if record_key != key:
                    continue
                with contextlib.suppress(ValidationError, ValueError):
                    whole = chunks.add(value, headers)
                    if whole is not None:
                        seen |= page_status(PageResult.model_validate_json(whole)) in CHANGES
            outcome[p.target_id] = seen
        return outcome

    async def _scan(
        self,
        tp: TopicPartition,
        start: int,
        *,
        until: Callable[[bytes | None, bytes], bool] | None = None,
    ) -> list[Scanned]:
        """(key, value, headers) of `tp`'s records from `start` to its end now; with
        `until`, only the first of them it is true of (the read stops there), or none."""
        self._consumer.assign([tp])
        end = (await self._consumer.end_offsets([tp]))[tp]
        scanned: list[Scanned] = []
        if end <= start:
            return scanned
        self._consumer.seek(tp, start)
        async with asyncio.timeout(self._timeout_s):
            while await self._consumer.position(tp) < end:
                batch = await self._consumer.getmany(
                    tp, timeout_ms=SCAN_WAIT_MS, max_records=SCAN_RECORDS
                )
                for record in batch.get(tp, []):
                    if record.offset >= end:
                        break
                    value = record.value or b""
                    if until is None:
                        scanned.append((record.key, value, list(record.headers)))
                    elif until(record.key, value):
                        return [(record.key, value, list(record.headers))]
        return scanned
