"""Topic metadata that group-less readers (client, replay) need to assign partitions.

Each look asks the broker about the topics it names, never about every topic: on a cluster
shared with other services (or a test suite's thousands of topics) an answer about every
topic costs the broker and the reader in proportion to the whole cluster, on every reader's
start. A look never creates a topic, whatever the cluster's `auto.create.topics.enable`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.metadata import MetadataRequest

from service.errors import BrokerUnavailableError
from service.messaging.kafka_config import client_options

if TYPE_CHECKING:
    from collections.abc import Collection

    from service.settings import Settings

NO_LEADER = -1
"""The leader of a partition that has none (yet)."""


async def topic_leaders(settings: Settings, topics: Collection[str]) -> dict[str, dict[int, int]]:
    """Partition -> leader (`NO_LEADER` while it has none) of each of `topics` that exists,
    from one metadata request for those topics alone."""
    client = AIOKafkaClient(**client_options(settings))
    timeout_s = settings.kafka_timeout.total_seconds()
    try:
        await asyncio.wait_for(client.bootstrap(), timeout_s)
        node = client.get_random_node()
        if node is None:
            raise BrokerUnavailableError("the cluster's metadata names no broker")
        request = MetadataRequest(list(topics), allow_auto_topic_creation=False)
        response = await asyncio.wait_for(client.send(node, request), timeout_s)
    finally:
        await client.close()
    return leaders_in(response.topics)


def leaders_in(described: list[tuple[object, ...]]) -> dict[str, dict[int, int]]:
    """Partition -> leader of each topic a metadata response describes without an error
    (version 0 has no `is_internal`; the partitions are last in every version)."""
    found: dict[str, dict[int, int]] = {}
    for error_code, name, *_, partitions in described:
        if error_code == 0 and isinstance(name, str) and isinstance(partitions, list | tuple):
            found[name] = {int(p[1]): int(p[2]) for p in partitions}
    return found


async def partitions_of(settings: Settings, topic: str) -> set[int]:
    """The partition numbers of `topic`, from a fresh metadata request."""
    partitions = (await topic_leaders(settings, [topic])).get(topic)
    if not partitions:
        raise BrokerUnavailableError(f"topic {topic} does not exist (is a worker running?)")
    return set(partitions)
