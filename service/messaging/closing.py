"""Stopping a Kafka consumer at shutdown, whether or not its broker is still there."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from service.logs import get_logger

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer

log = get_logger(__name__)


async def stop_consumer(consumer: AIOKafkaConsumer, deadline_s: float) -> None:
    """`consumer.stop()` within `deadline_s`; its connections are closed even when the
    broker went away first (`docker compose down` stops the broker beside the workers).

    aiokafka's `stop` cancels the fetches in flight and awaits them; a fetch that failed on
    the vanished broker and waits out its retry backoff lets that cancel escape from
    `stop`, before `stop` closes the client. The escaped cancel is not this task's own (no
    cancel of it is pending): it is logged (`consumer.stop_interrupted`), the client closed,
    and the shutdown goes on. A cancel of this task still propagates."""
    try:
        await asyncio.wait_for(consumer.stop(), deadline_s)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.warning("consumer.stop_interrupted", note="a fetch's cancel escaped aiokafka's stop")
        # the last step of aiokafka's stop, which the escaped cancel skipped
        await asyncio.wait_for(consumer._client.close(), deadline_s)  # noqa: SLF001
