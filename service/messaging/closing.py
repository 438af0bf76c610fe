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
    and the shutdown goes on. A stop still running at the deadline is cancelled and left
    (`consumer.stop_late`; not `wait_for`, which then waits for the cancel to take, and a
    stop that swallows it never ends). A cancel of this task still propagates."""
    stopping = asyncio.ensure_future(consumer.stop())
    try:
        done, _ = await asyncio.wait({stopping}, timeout=deadline_s)
    except asyncio.CancelledError:
        stopping.cancel()
        raise
    if not done:
        stopping.cancel()
        log.warning("consumer.stop_late", deadline_s=deadline_s)
    elif stopping.cancelled():
        log.warning("consumer.stop_interrupted", note="a fetch's cancel escaped aiokafka's stop")
    else:
        stopping.result()  # an error of the stop is the caller's
        return
    # the last step of aiokafka's stop, which the escaped cancel or the deadline skipped
    closing = asyncio.ensure_future(consumer._client.close())  # noqa: SLF001
    if not (await asyncio.wait({closing}, timeout=deadline_s))[0]:
        closing.cancel()
        log.warning("consumer.close_late", deadline_s=deadline_s)
