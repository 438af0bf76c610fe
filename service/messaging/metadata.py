"""Topic metadata that group-less readers (client, replay) need to assign partitions."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiokafka.client import AIOKafkaClient

from service.errors import BrokerUnavailableError
from service.messaging.kafka_config import client_options

if TYPE_CHECKING:
    from service.settings import Settings


async def partitions_of(settings: Settings, topic: str) -> set[int]:
    """The partition numbers of `topic`, from a fresh metadata request."""
    client = AIOKafkaClient(**client_options(settings))
    timeout_s = settings.kafka_timeout.total_seconds()
    try:
        await asyncio.wait_for(client.bootstrap(), timeout_s)
        cluster = await asyncio.wait_for(client.fetch_all_metadata(), timeout_s)
    finally:
        await client.close()
    partitions = cluster.partitions_for_topic(topic)
    if not partitions:
        raise BrokerUnavailableError(f"topic {topic} does not exist (is a worker running?)")
    return set(partitions)
