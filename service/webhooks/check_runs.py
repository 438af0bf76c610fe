"""Whether each request of a monitor's check has ended: the dispatcher sends the check's one
`monitor.check.completed` when the terminal event it handles leaves none of them running. It
reads each other request's progress partition from where its events start (its marker says)
to the partition's end now."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from service.contracts import EventType, ProgressEvent
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.reader import PartitionSpan
from service.messaging.topics import partition_for

if TYPE_CHECKING:
    from service.settings import Settings


class CheckRuns:
    """Finds a request's terminal event on the progress topic; one read at a time."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._consumer = AIOKafkaConsumer(
            **client_options(settings), enable_auto_commit=False, group_id=None
        )
        self._lock = asyncio.Lock()
        self._count = 0

    async def start(self) -> None:
        await self._consumer.start()
        self._count = len(await partitions_of(self._settings, self._settings.progress_topic))

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await stop_consumer(self._consumer, self._settings.kafka_timeout.total_seconds())

    async def ended(self, request_id: str, start: int) -> EventType | None:
        """The type of `request_id`'s last terminal event from `start` to its partition's
        end now, or None while it runs; TimeoutError when it cannot be read in time."""
        topic = self._settings.progress_topic
        tp = TopicPartition(topic, partition_for(request_id, self._count))
        ended = None
        async with asyncio.timeout(self._settings.kafka_timeout.total_seconds()), self._lock:
            span = await PartitionSpan.seek(self._consumer, [tp], from_offset=start)
            async for record in span.records(key=request_id.encode()):
                with contextlib.suppress(ValidationError, ValueError):
                    event = ProgressEvent.model_validate_json(record.value or b"")
                    if event.is_terminal:
                        ended = event.type
        return ended
