"""The users' side: submit a crawl request, follow its progress and results.

async with CrawlClient(settings) as client:
    results = await client.crawl(["https://example.com/"])
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from service.contracts import (
    CrawlOptions,
    CrawlRequest,
    EventType,
    PageResult,
    ProgressEvent,
    dump,
)
from service.errors import BrokerUnavailableError, CrawlstreamError
from service.messaging.chunks import Reassembler
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.publisher import Publisher
from service.settings import Settings, load_settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from types import TracebackType

    from pydantic import JsonValue

FOLLOW_TIMEOUT_S: Final = 600.0
"""Default deadline for following one request to its end."""

POLL_TIMEOUT_MS: Final = 500

_WITH_RESULTS: Final = frozenset({EventType.COMPLETED, EventType.FAILED})
"""Terminal events after which every URL has a result to wait for."""


class FollowTimeoutError(CrawlstreamError):
    """The request did not end within the deadline of `follow()`."""


class CrawlClient:
    """Produces requests and reads their results; an async context manager."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings or load_settings()
        self._publisher = Publisher(self._settings)
        self._starts: dict[str, dict[TopicPartition, int]] = {}
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
    ) -> str:
        """Produce a request (validated here first) and return its request_id."""
        request = CrawlRequest.model_validate(
            {
                "request_id": request_id or uuid.uuid4().hex,
                "urls": list(urls),
                "options": options or CrawlOptions(),
                "metadata": metadata or {},
            },
            context={"max_urls": self._settings.max_urls_per_request},
        )
        async with self._follower() as consumer:
            self._starts[request.request_id] = await self._end_offsets(consumer, request.request_id)
        await self._publisher.send_and_wait(
            self._settings.requests_topic, request.request_id, dump(request)
        )
        return request.request_id

    async def follow(
        self, request_id: str, *, timeout_s: float = FOLLOW_TIMEOUT_S
    ) -> AsyncIterator[ProgressEvent | PageResult]:
        """Events and results of `request_id` in arrival order, until its end.

        Results are yielded once per `result_id` (a redelivery's duplicates are dropped);
        it ends after the terminal event, once every URL's result has arrived, and raises
        `FollowTimeoutError` when that has not happened within `timeout_s`.
        """
        async with self._follower() as consumer:
            starts = self._starts.get(request_id) or await self._beginnings(consumer, request_id)
            consumer.assign(list(starts))
            for tp, offset in starts.items():
                consumer.seek(tp, offset)
            follow = _Follow(self._settings, request_id)
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
        request_id = await self.submit(urls, options)
        results: dict[str, PageResult] = {}
        async for message in self.follow(request_id, timeout_s=timeout_s):
            if isinstance(message, PageResult):
                results[message.url] = message
        return [results[url] for url in dict.fromkeys(urls) if url in results]

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
        await asyncio.wait_for(self.stop(), self._timeout_s)


class _Follow:
    """The state of following one request: duplicates seen, chunks pending, the end."""

    def __init__(self, settings: Settings, request_id: str) -> None:
        self._settings = settings
        self._request_id = request_id.encode()
        self._chunks = Reassembler()
        self._seen: set[str] = set()
        self._terminal: ProgressEvent | None = None

    async def messages(
        self, consumer: AIOKafkaConsumer, timeout_s: float
    ) -> AsyncIterator[ProgressEvent | PageResult]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self.done():
            if loop.time() > deadline:
                raise FollowTimeoutError(
                    f"request {self._request_id.decode()} did not end within {timeout_s:g} s"
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
        if record.topic == self._settings.progress_topic:  # type: ignore[attr-defined]
            event = ProgressEvent.model_validate_json(record.value)  # type: ignore[attr-defined]
            if event.is_terminal:
                self._terminal = event
            return event
        whole = self._chunks.add(record.value, list(record.headers))  # type: ignore[attr-defined]
        if whole is None:
            return None
        result = PageResult.model_validate_json(whole)
        if result.result_id in self._seen:
            return None
        self._seen.add(result.result_id)
        return result

    def done(self) -> bool:
        terminal = self._terminal
        if terminal is None:
            return False
        return terminal.type not in _WITH_RESULTS or len(self._seen) >= terminal.total
