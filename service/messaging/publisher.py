"""The producer side: every message is acknowledged by all in-sync replicas before a commit."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final, Self

from aiokafka import AIOKafkaProducer

from service.errors import BrokerUnavailableError
from service.messaging import chunks
from service.messaging.kafka_config import client_options

if TYPE_CHECKING:
    from types import TracebackType

    from service.settings import Settings

CHUNK_OVERHEAD_BYTES: Final = 16_384
"""Room left in a message for key, headers and record framing when chunking."""

Delivery = asyncio.Future[object]


class Publisher:
    """An idempotent, `acks=all`, compressed producer; an async context manager."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._chunk_bytes = int(settings.max_message_bytes) - CHUNK_OVERHEAD_BYTES
        self._producer = AIOKafkaProducer(
            **client_options(settings),
            acks="all",
            enable_idempotence=True,
            compression_type="zstd",
            linger_ms=5,
            max_request_size=int(settings.max_message_bytes),
        )

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

    async def send(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes,
        headers: chunks.Headers | None = None,
        *,
        chunk_id: str | None = None,
    ) -> list[Delivery]:
        """Queue one message (or its chunks); the returned futures resolve on acknowledgement.

        Messages sent one after another with the same key keep their order.
        """
        raw_key = key.encode() if isinstance(key, str) else key
        parts = (
            chunks.split(value, chunk_id=chunk_id, max_bytes=self._chunk_bytes)
            if chunk_id is not None
            else [(value, [])]
        )
        deliveries = []
        for part, chunk_headers in parts:
            delivery = await asyncio.wait_for(
                self._producer.send(
                    topic, part, key=raw_key, headers=[*(headers or []), *chunk_headers]
                ),
                self._timeout_s,
            )
            deliveries.append(delivery)
        return deliveries

    async def send_and_wait(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes,
        headers: chunks.Headers | None = None,
    ) -> None:
        await self.wait(await self.send(topic, key, value, headers))

    async def wait(self, deliveries: list[Delivery]) -> None:
        """Wait until every delivery is acknowledged, within the Kafka deadline."""
        if deliveries:
            await asyncio.wait_for(asyncio.gather(*deliveries), self._timeout_s)
