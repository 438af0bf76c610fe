"""The producer side: every message is acknowledged by all in-sync replicas before a commit."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaProducer

from service.errors import BrokerUnavailableError
from service.messaging import chunks
from service.messaging.kafka_config import client_options
from service.messaging.seal import Seal

if TYPE_CHECKING:
    from types import TracebackType

    from aiokafka.structs import RecordMetadata

    from service.settings import Settings

JSON_HEADERS: Final = [("content-type", b"application/json"), ("schema-version", b"1")]
"""The headers of every JSON record the service writes."""

CHUNK_OVERHEAD_BYTES: Final = 16_384
"""Room left in a message for key, headers and record framing when chunking."""

BATCH_OVERHEAD_BYTES: Final = 4_096
"""Room left in a partition's batch (its records' uncompressed bytes) below the largest
message a topic takes (`max.message.bytes`, the message size plus this): aiokafka's default of
16 KiB holds one page result, and a send to a partition whose batch is full waits until that
batch has gone to the broker, so the results, records and cache entries of the pages of one
partition went out one produce request at a time."""

Delivery = asyncio.Future[object]


@dataclass(frozen=True, slots=True)
class Message:
    """One Kafka message as it is sent (a chunk of a large value is one message)."""

    topic: str
    key: bytes | None
    value: bytes | None
    """None: a tombstone (a compacted topic then forgets the key)."""
    headers: chunks.Headers = field(default_factory=list)
    partition: int | None = None
    """Where it goes; None: the partition of its key (murmur2, as Java's producers)."""


class Publisher:
    """An idempotent, `acks=all`, compressed producer; an async context manager."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._chunk_bytes = int(settings.max_message_bytes) - CHUNK_OVERHEAD_BYTES
        self._seal = Seal.from_settings(settings)
        """Tags what goes to the deployment's internal topics (`seal.py`)."""
        self._producer = AIOKafkaProducer(
            **client_options(settings),
            acks="all",
            enable_idempotence=True,
            compression_type="zstd",
            linger_ms=0,  # what waits for an in-flight request is batched anyway
            max_request_size=int(settings.max_message_bytes),
            max_batch_size=int(settings.max_message_bytes) - BATCH_OVERHEAD_BYTES,
        )

    @property
    def timeout_s(self) -> float:
        """The Kafka deadline this publisher works with."""
        return self._timeout_s

    async def __aenter__(self) -> Self:
        try:
            await asyncio.wait_for(self._producer.start(), self._timeout_s)
        except (TimeoutError, OSError) as exc:
            await self._producer.stop()
            raise BrokerUnavailableError(f"producer cannot reach Kafka: {exc}") from exc
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.wait_for(self._producer.stop(), self._timeout_s)

    def messages(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes,
        headers: chunks.Headers | None = None,
        *,
        chunk_id: str | None = None,
        partition: int | None = None,
    ) -> list[Message]:
        """The message (or, with `chunk_id`, the chunks) that carry `value`, in order; on an
        internal topic each names the deployment and carries the whole value's tag."""
        raw_key = key.encode() if isinstance(key, str) else key
        if self._seal.seals(topic):
            headers = [*(headers or []), *self._seal.headers(topic, raw_key, value)]
        parts = (
            chunks.split(value, chunk_id=chunk_id, max_bytes=self._chunk_bytes)
            if chunk_id is not None
            else [(value, [])]
        )
        return [
            Message(
                topic,
                raw_key,
                part,
                chunks.with_chunk_headers(headers or [], chunk_headers),
                partition,
            )
            for part, chunk_headers in parts
        ]

    async def send(self, message: Message) -> Delivery:
        """Queue one message; the returned future resolves on acknowledgement.

        Messages sent one after another with the same key keep their order.
        """
        return await asyncio.wait_for(
            self._producer.send(
                message.topic,
                message.value,
                key=message.key,
                headers=message.headers,
                partition=message.partition,
            ),
            self._timeout_s,
        )

    async def tombstone(self, topic: str, key: str) -> RecordMetadata:
        """Write a tombstone of `key` (a compacted topic forgets it) and wait for its
        acknowledgement."""
        delivery = await self.send(Message(topic, key.encode(), None))
        return await asyncio.wait_for(delivery, self._timeout_s)

    async def send_and_wait(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes,
        headers: chunks.Headers | None = None,
    ) -> RecordMetadata:
        """Send one message and wait for its acknowledgement; returns where it was written."""
        delivery = await self.send(*self.messages(topic, key, value, headers))
        return await asyncio.wait_for(delivery, self._timeout_s)
