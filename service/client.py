"""The users' side: submit a crawl request, follow its progress and results.

async with CrawlClient(settings) as client:
    results = await client.crawl(["https://example.com/"])

A request_id is the producer's idempotency key, not the identity of a submission: two records
with one request_id both run. `submit()` returns a `Submission` that names its record, and
`follow()` of it yields that record's messages only.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from service.contracts import (
    CancelControl,
    CrawlOptions,
    CrawlRequest,
    CrawlSpec,
    EventType,
    PageResult,
    ProgressEvent,
    RecordSource,
    dump,
    dump_request,
)
from service.errors import BrokerUnavailableError, CrawlstreamError
from service.messaging.chunks import Reassembler
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.publisher import Publisher
from service.messaging.reader import PartitionSpan
from service.settings import Settings, load_settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from types import TracebackType

    from aiokafka.structs import RecordMetadata
    from pydantic import JsonValue

FOLLOW_TIMEOUT_S: Final = 600.0
"""Default deadline for following one request to its end."""

POLL_TIMEOUT_MS: Final = 500

_EVERY_URL: Final = frozenset({EventType.COMPLETED, EventType.FAILED})
"""Terminal events after which every URL has a result to wait for; after `cancelled` and
`expired`, the results their counts add up to (none when the run crawled nothing)."""


class FollowTimeoutError(CrawlstreamError):
    """The request did not end within the deadline of `follow()`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Submission:
    """One produced request record: its request_id and where the record was written.

    Every result and event of that record carries the same `source`, also after a
    redelivery; another record with the same request_id has another.
    """

    request_id: str
    source: RecordSource

    @classmethod
    def written(cls, request_id: str, metadata: RecordMetadata) -> Submission:
        """The submission of a record the producer has written at `metadata`."""
        source = RecordSource(
            topic=metadata.topic, partition=metadata.partition, offset=metadata.offset
        )
        return cls(request_id=request_id, source=source)

    def __str__(self) -> str:
        where = self.source
        return f"{self.request_id} ({where.topic}[{where.partition}]@{where.offset})"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestStatus:
    """What `CrawlClient.status()` found: `state` is `unknown`, `accepted`, `running` or the
    terminal event's type; the rest comes from the latest event of the latest run."""

    request_id: str
    state: str
    total: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    run_id: str | None = None
    worker: str | None = None
    last_event_at: str | None = None
    detail: str | None = None

    @classmethod
    def of(cls, request_id: str, last: ProgressEvent | None) -> RequestStatus:
        if last is None:
            return cls(request_id=request_id, state="unknown")
        state = last.type.value
        if not last.is_terminal and last.type != EventType.ACCEPTED:
            state = "running"
        return cls(
            request_id=request_id,
            state=state,
            total=last.total,
            succeeded=last.succeeded,
            failed=last.failed,
            cancelled=last.cancelled,
            run_id=last.run_id,
            worker=last.worker,
            last_event_at=last.at.isoformat(),
            detail=last.detail if last.is_terminal else None,
        )

    def line(self) -> str:
        """One line for people."""
        if self.state == "unknown":
            return f"{self.request_id}: unknown (no event yet: queued, or never submitted)"
        counts = (
            f"{self.succeeded} succeeded, {self.failed} failed, {self.cancelled} cancelled "
            f"of {self.total}"
        )
        end = f" ({self.detail})" if self.detail else ""
        return (
            f"{self.request_id}: {self.state}{end}, {counts}; worker {self.worker}, "
            f"last event {self.last_event_at}"
        )


class CrawlClient:
    """Produces requests and reads their results; an async context manager."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings or load_settings()
        self._publisher = Publisher(self._settings)
        self._starts: dict[Submission, dict[TopicPartition, int]] = {}
        self._partitioner = DefaultPartitioner()

    async def __aenter__(self) -> Self:
        await self._publisher.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._publisher.__aexit__(exc_type, exc, tb)

    async def submit(
        self,
        urls: Sequence[str],
        options: CrawlOptions | None = None,
        *,
        request_id: str | None = None,
        metadata: dict[str, JsonValue] | None = None,
        crawl: CrawlSpec | None = None,
    ) -> Submission:
        """Produce a request (validated here first) and return its submission; with `crawl`,
        a deep crawl from `urls`.

        Reusing a `request_id` makes a second submission, not a retry of the first: both run.
        """
        request = CrawlRequest.model_validate(
            {
                "request_id": request_id or uuid.uuid4().hex,
                "urls": list(urls),
                "options": options or CrawlOptions(),
                "metadata": metadata or {},
                "crawl": crawl,
            },
            context={
                "max_urls": self._settings.max_urls_per_request,
                "max_crawl_pages": self._settings.max_crawl_pages,
            },
        )
        async with self._follower() as consumer:
            starts = await self._end_offsets(consumer, request.request_id)
        written = await self._publisher.send_and_wait(
            self._settings.requests_topic, request.request_id, dump_request(request)
        )
        submission = Submission.written(request.request_id, written)
        self._starts[submission] = starts
        return submission

    async def output_positions(self, request_id: str) -> dict[str, tuple[int, int]]:
        """Per output topic (results, progress), the partition `request_id`'s messages go to
        and its end offset now: where they would start if it were produced next."""
        async with self._follower() as consumer:
            ends = await self._end_offsets(consumer, request_id)
        return {tp.topic: (tp.partition, offset) for tp, offset in ends.items()}

    async def follow(
        self, submission: Submission | str, *, timeout_s: float = FOLLOW_TIMEOUT_S
    ) -> AsyncIterator[ProgressEvent | PageResult]:
        """Events and results of one submission in arrival order, until its end.

        Only messages whose `source` is the submission's record are yielded; results are
        yielded once per `result_id` (a redelivery of the record repeats them). It ends after
        the terminal event, once every URL's result has arrived, and raises
        `FollowTimeoutError` when that has not happened within `timeout_s`.

        A bare request_id follows every submission of it found on the output topics from
        their beginning, each kept apart (results deduplicated per `source`), and ends once
        each submission it has seen has ended; tell them apart by `message.source`.
        """
        async with self._follower() as consumer:
            starts = await self._start_offsets(consumer, submission)
            consumer.assign(list(starts))
            for tp, offset in starts.items():
                consumer.seek(tp, offset)
            follow = _Follow(self._settings, submission)
            async for message in follow.messages(consumer, timeout_s):
                yield message

    async def crawl(
        self,
        urls: Sequence[str],
        options: CrawlOptions | None = None,
        *,
        timeout_s: float = FOLLOW_TIMEOUT_S,
    ) -> list[PageResult]:
        """Submit and wait: one result per URL, in the order of `urls`."""
        submission = await self.submit(urls, options)
        results: dict[str, PageResult] = {}
        async for message in self.follow(submission, timeout_s=timeout_s):
            if isinstance(message, PageResult):
                results[message.url] = message
        return [results[url] for url in dict.fromkeys(urls) if url in results]

    async def cancel(self, request_id: str, reason: str | None = None) -> CancelControl:
        """Cancel every run of `request_id`: running pages close, the rest get `cancelled`
        results, the run ends `cancelled`. A request not yet started ends `cancelled` without
        rendering; one already finished is left as it is. Remembered for
        `CRAWL_CANCEL_RETENTION`: a later submission reusing the request_id is cancelled too."""
        message = CancelControl(request_id=request_id, reason=reason)
        await self._publisher.send_and_wait(self._settings.control_topic, request_id, dump(message))
        return message

    async def status(self, request_id: str) -> RequestStatus:
        """The state of the latest run of `request_id`, read from the progress topic as it is
        now; `unknown` when no event of it is there (not picked up yet, or never submitted)."""
        async with self._follower() as consumer:
            [progress] = [
                tp
                for tp in await self._partitions(request_id)
                if tp.topic == self._settings.progress_topic
            ]
            span = await PartitionSpan.seek(consumer, [progress])
            async with asyncio.timeout(self._settings.kafka_timeout.total_seconds()):
                last = await _latest_event(span, request_id)
        return RequestStatus.of(request_id, last)

    def _follower(self) -> AIOKafkaConsumer:
        return _StartedConsumer(self._settings)

    async def _partitions(self, request_id: str) -> list[TopicPartition]:
        key = request_id.encode()
        found = []
        for topic in (self._settings.results_topic, self._settings.progress_topic):
            partitions = sorted(await partitions_of(self._settings, topic))
            chosen = self._partitioner(key, partitions, partitions)
            found.append(TopicPartition(topic, chosen))
        return found

    async def _end_offsets(
        self, consumer: AIOKafkaConsumer, request_id: str
    ) -> dict[TopicPartition, int]:
        partitions = await self._partitions(request_id)
        return dict(await consumer.end_offsets(partitions))

    async def _beginnings(
        self, consumer: AIOKafkaConsumer, request_id: str
    ) -> dict[TopicPartition, int]:
        partitions = await self._partitions(request_id)
        return dict(await consumer.beginning_offsets(partitions))

    async def _start_offsets(
        self, consumer: AIOKafkaConsumer, submission: Submission | str
    ) -> dict[TopicPartition, int]:
        """Where following begins: the output topics' ends from just before this client
        produced the record (nothing of it can be earlier), else their beginnings."""
        if isinstance(submission, str):
            return await self._beginnings(consumer, submission)
        known = self._starts.get(submission)
        return known or await self._beginnings(consumer, submission.request_id)


async def _latest_event(span: PartitionSpan, request_id: str) -> ProgressEvent | None:
    """The last event of `request_id` in the progress topic's `span`."""
    last: ProgressEvent | None = None
    key = request_id.encode()
    async for record in span.records(poll_timeout_ms=POLL_TIMEOUT_MS):
        if record.key == key:
            last = ProgressEvent.model_validate_json(record.value)
    return last


class _StartedConsumer(AIOKafkaConsumer):  # type: ignore[misc]
    """A group-less consumer that starts and stops as an async context manager."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(**client_options(settings), enable_auto_commit=False, group_id=None)
        self._timeout_s = settings.kafka_timeout.total_seconds()

    async def __aenter__(self) -> Self:
        try:
            await asyncio.wait_for(self.start(), self._timeout_s)
        except (TimeoutError, OSError) as exc:
            await self.stop()
            raise BrokerUnavailableError(f"cannot reach Kafka: {exc}") from exc
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await stop_consumer(self, self._timeout_s)


@dataclass(slots=True)
class _Outcome:
    """What one submission has delivered so far: its results' IDs and its terminal event."""

    seen: set[str] = field(default_factory=set)
    terminal: ProgressEvent | None = None

    def take(self, message: ProgressEvent | PageResult) -> ProgressEvent | PageResult | None:
        """`message`, or None when it repeats a result already taken."""
        if isinstance(message, ProgressEvent):
            if message.is_terminal:
                self.terminal = message
            return message
        if message.result_id in self.seen:
            return None
        self.seen.add(message.result_id)
        return message

    def done(self) -> bool:
        terminal = self.terminal
        if terminal is None:
            return False
        if terminal.type in _EVERY_URL:
            return len(self.seen) >= terminal.total
        return len(self.seen) >= terminal.succeeded + terminal.failed + terminal.cancelled


class _Follow:
    """The state of following a submission (or every submission of a bare request_id):
    chunks pending, and per source record the results seen and the end."""

    def __init__(self, settings: Settings, target: Submission | str) -> None:
        self._settings = settings
        self._target = target
        request_id = target if isinstance(target, str) else target.request_id
        self._request_id = request_id.encode()
        self._chunks = Reassembler()
        self._outcomes: dict[RecordSource | None, _Outcome] = {}

    async def messages(
        self, consumer: AIOKafkaConsumer, timeout_s: float
    ) -> AsyncIterator[ProgressEvent | PageResult]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.done():
            if loop.time() > deadline:
                raise FollowTimeoutError(
                    f"request {self._target} did not end within {timeout_s:g} s"
                )
            batch = await consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)
            for records in batch.values():
                for record in records:
                    message = self.accept(record)
                    if message is not None:
                        yield message

    def accept(self, record: object) -> ProgressEvent | PageResult | None:
        if record.key != self._request_id:  # type: ignore[attr-defined]
            return None
        message = self._parse(record)
        if message is None or not self._wanted(message.source):
            return None
        return self._outcomes.setdefault(message.source, _Outcome()).take(message)

    def done(self) -> bool:
        """Every followed submission has ended (and at least one was seen)."""
        outcomes = self._outcomes.values()
        return bool(outcomes) and all(outcome.done() for outcome in outcomes)

    def _wanted(self, source: RecordSource | None) -> bool:
        return isinstance(self._target, str) or source == self._target.source

    def _parse(self, record: object) -> ProgressEvent | PageResult | None:
        """The record's message, or None while it is an incomplete chunk of one."""
        if record.topic == self._settings.progress_topic:  # type: ignore[attr-defined]
            return ProgressEvent.model_validate_json(record.value)  # type: ignore[attr-defined]
        whole = self._chunks.add(record.value, list(record.headers))  # type: ignore[attr-defined]
        return None if whole is None else PageResult.model_validate_json(whole)
