"""Writes monitors to the compacted monitors topic (the gateway and `crawlstream monitor`):
a record per change, a tombstone to delete. An async context manager."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Self

from aiokafka import AIOKafkaProducer

from service.messaging.kafka_config import client_options

if TYPE_CHECKING:
    from service.contracts_monitors import MonitorRecord
    from service.settings import Settings


class MonitorWriter:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._topic = settings.monitors_topic
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._producer: AIOKafkaProducer | None = None
        """Made on entry: a writer never entered holds no client."""

    async def __aenter__(self) -> Self:
        self._producer = AIOKafkaProducer(
            **client_options(self._settings), acks="all", enable_idempotence=True
        )
        await asyncio.wait_for(self._producer.start(), self._timeout_s)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await asyncio.wait_for(producer.stop(), self._timeout_s)

    async def put(self, record: MonitorRecord) -> None:
        """Write `record` (its id is the key); returns once the broker has it."""
        value = record.model_dump_json().encode()
        await self._send(record.id, value)

    async def delete(self, monitor_id: str) -> None:
        """A tombstone: the monitor stops firing once its owner reads it."""
        await self._send(monitor_id, None)

    async def _send(self, key: str, value: bytes | None) -> None:
        if self._producer is None:
            raise RuntimeError("MonitorWriter used outside `async with`")
        sent = await asyncio.wait_for(
            self._producer.send(self._topic, value, key=key.encode()), self._timeout_s
        )
        await asyncio.wait_for(sent, self._timeout_s)
