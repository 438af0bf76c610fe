"""What a tracked deep crawl reached, kept per seed, tag and crawl, and the pages the
previous such crawl reached that this one no longer does.

At the end of a completed deep crawl with `change_tracking`, its coordinator reads the
previous crawl's reach (a compacted record keyed by the seeds, the tag, the tenant, the
reading options and the crawl spec), reports each page that crawl reached and this one did
not as a `removed` result (`visibility` `hidden` when one GET through the egress proxy shows
it still answers, `visible` otherwise) with its change record, and keeps its own reach once
its terminal event is acknowledged (a coordinator that dies before that leaves the previous
reach: the next run reports the same pages again, with the same `result_id`s).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import TYPE_CHECKING, Final, Literal

import cramjam
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from pydantic import BaseModel, ConfigDict, ValidationError

from service.cache.variant import tenant_scope
from service.changes.history import history_key
from service.contracts import (
    SCHEMA_VERSION,
    ErrorCode,
    PageChange,
    PageError,
    PageResult,
    Timestamp,
    dump,
    result_id_for,
    utc_now,
)
from service.contracts_changes import ChangeRecord
from service.errors import BrokerUnavailableError
from service.frontier.urls import normalise
from service.logs import get_logger
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.publisher import Message
from service.messaging.reader import PartitionSpan
from service.messaging.topics import partition_for

if TYPE_CHECKING:
    from datetime import datetime

    from service.contracts import ChangeTracking, CrawlRequest, RecordSource
    from service.frontier.sitemap import TextSource
    from service.messaging.publisher import Publisher
    from service.settings import Settings

log = get_logger(__name__)

REACH_ERRORS: Final = (KafkaError, TimeoutError, BrokerUnavailableError, OSError, ValueError)
"""What reading or keeping a reach may meet; the crawl then reports no unreached page."""

PROBE_BYTES: Final = 1
"""Body bytes a probe of an unreached page reads: its status is the answer."""

PROBES_AT_ONCE: Final = 8
"""Unreached pages probed at the same time."""

ANSWERS_BELOW: Final = 400
"""A probe status below this: the page still answers (`hidden`)."""


class PriorReach(BaseModel):
    """The reach a crawl was compared with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str
    crawled_at: Timestamp
    urls: tuple[str, ...]


class ReachRecord(BaseModel):
    """Value of `CRAWL_CHANGE_CRAWLS_TOPIC`: the pages one tracked deep crawl reached, and
    the reach it was compared with (for a run that takes the same request over)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    key: str
    request_id: str
    crawled_at: Timestamp
    urls: tuple[str, ...]
    """Normalised, as the crawl admitted them."""
    before: PriorReach | None = None

    def basis(self, request_id: str) -> PriorReach | None:
        """What a run of `request_id` compares with: this reach, or for a run of the same
        request (its earlier run kept this before it died) the one this was compared with."""
        if request_id == self.request_id:
            return self.before
        return PriorReach(request_id=self.request_id, crawled_at=self.crawled_at, urls=self.urls)


def reach_key(request: CrawlRequest, tracking: ChangeTracking) -> str:
    """The key of a crawl's reach: its seeds' histories (tenant, tag, variant, reading) and
    its crawl spec, so only a crawl of the same seeds and limits is compared with it."""
    scope = tenant_scope(request.metadata)
    seeds = sorted(normalise(url) or url for url in request.urls)
    material = {
        "seeds": [history_key(seed, request.options, tracking, scope=scope) for seed in seeds],
        "crawl": None if request.crawl is None else request.crawl.model_dump(mode="json"),
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class Unreached:
    """The report of one completed tracked deep crawl (`Run` calls `results`, then `keep`)."""

    def __init__(
        self,
        settings: Settings,
        publisher: Publisher,
        probe: TextSource,
        *,
        request: CrawlRequest,
        tracking: ChangeTracking,
        run_id: str,
        source: RecordSource,
    ) -> None:
        self._settings = settings
        self._publisher = publisher
        self._probe = probe
        self._request = request
        self._tracking = tracking
        self._run_id = run_id
        self._source = source
        self._key = reach_key(request, tracking)
        self._now = utc_now()
        self._basis: PriorReach | None = None
        """What this crawl is compared with (read by `results`)."""

    async def results(self, reached: set[str]) -> list[PageResult]:
        """A `removed` result for each page the previous crawl reached and `reached` lacks
        (none when the previous reach cannot be read); their change records are sent."""
        try:
            record = await self._previous()
        except REACH_ERRORS as exc:
            log.warning("changes.reach_unreadable", error=repr(exc)[:300])
            return []
        previous = None if record is None else record.basis(self._request.request_id)
        self._basis = previous
        log.info("changes.reach_read", found=record is not None, compared=previous is not None)
        if previous is None:
            return []
        gone = [url for url in previous.urls if url not in reached]
        limit = asyncio.Semaphore(PROBES_AT_ONCE)
        try:
            results = await asyncio.gather(*(self._report(url, previous, limit) for url in gone))
        except REACH_ERRORS as exc:  # the feed may hold some of them: at least once
            log.warning("changes.reach_not_reported", error=repr(exc)[:300])
            return []
        return list(results)

    async def keep(self, reached: set[str]) -> None:
        """Keep this crawl's reach for the next one (before its terminal event: whoever
        sees the crawl completed finds its reach)."""
        record = ReachRecord(
            key=self._key,
            request_id=self._request.request_id,
            crawled_at=self._now,
            urls=tuple(sorted(reached)),
            before=self._basis,
        )
        value = bytes(cramjam.zstd.compress(record.model_dump_json().encode()))
        message = Message(self._settings.change_crawls_topic, self._key.encode(), value)
        try:
            sent = await self._publisher.send(message)
            written = await asyncio.wait_for(sent, self._publisher.timeout_s)
        except REACH_ERRORS as exc:
            log.warning("changes.reach_not_kept", error=repr(exc)[:300])
            return
        where = {"partition": getattr(written, "partition", None)}
        log.info("changes.reach_kept", pages=len(reached), **where)

    async def _report(self, url: str, previous: PriorReach, limit: asyncio.Semaphore) -> PageResult:
        async with limit:
            answer = await self._probe.fetch(url, max_bytes=PROBE_BYTES)
        status = answer.status
        answers = status is not None and status < ANSWERS_BELOW
        change = PageChange(
            status="removed",
            previous_fetched_at=previous.crawled_at,
            visibility="hidden" if answers else "visible",
        )
        result = self._result(url, status, change)
        await self._announce(result, previous.crawled_at)
        return result

    def _result(self, url: str, status: int | None, change: PageChange) -> PageResult:
        request = self._request
        error = None
        if status is None:
            error = PageError(code=ErrorCode.CONNECTION, message="no answer to the probe")
        elif status >= ANSWERS_BELOW:
            error = PageError(code=ErrorCode.HTTP_ERROR, message=f"HTTP {status}")
        return PageResult(
            request_id=request.request_id,
            result_id=result_id_for(request.request_id, url),
            run_id=self._run_id,
            url=url,
            ok=error is None,
            status_code=status,
            error=error,
            elapsed_ms=0,
            fetched_at=self._now,
            worker=self._settings.worker_name,
            request_metadata=request.metadata,
            source=self._source,
            change_tracking=change,
        )

    async def _announce(self, result: PageResult, previous_at: datetime) -> None:
        record = ChangeRecord(
            url=result.url,
            status="removed",
            tag=self._tracking.tag,
            request_id=result.request_id,
            result_id=result.result_id,
            run_id=self._run_id,
            source=self._source,
            fetched_at=self._now,
            previous_fetched_at=previous_at,
        )
        message = Message(self._settings.changes_topic, result.url.encode(), dump(record))
        await asyncio.wait_for(await self._publisher.send(message), self._publisher.timeout_s)

    async def _previous(self) -> ReachRecord | None:
        """The newest reach of this key: its partition read from the start."""
        topic = self._settings.change_crawls_topic
        count = len(await partitions_of(self._settings, topic))
        tp = TopicPartition(topic, partition_for(self._key, count))
        consumer = AIOKafkaConsumer(
            **client_options(self._settings), group_id=None, enable_auto_commit=False
        )
        timeout_s = self._settings.kafka_timeout.total_seconds()
        raw: bytes | None = None
        async with asyncio.timeout(timeout_s):
            await consumer.start()
        try:
            async with asyncio.timeout(timeout_s):
                span = await PartitionSpan.seek(consumer, [tp])
            async for record in span.records():
                if record.key == self._key.encode():
                    raw = record.value
        finally:
            await consumer.stop()
        return None if not raw else _decoded(raw)


def _decoded(raw: bytes) -> ReachRecord | None:
    try:
        return ReachRecord.model_validate_json(bytes(cramjam.zstd.decompress(raw)))
    except (ValidationError, cramjam.DecompressionError) as exc:
        log.warning("changes.reach_unreadable", error=str(exc)[:200])
        return None
