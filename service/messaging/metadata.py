"""Topic metadata that group-less readers (client, replay) need to assign partitions.

Each look asks the broker about the topics it names, never about every topic: on a cluster
shared with other services (or a test suite's thousands of topics) an answer about every
topic costs the broker and the reader in proportion to the whole cluster, on every reader's
start. A look never creates a topic, whatever the cluster's `auto.create.topics.enable`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import LeaderNotAvailableError
from aiokafka.protocol.metadata import MetadataRequest

from service.errors import BrokerUnavailableError
from service.messaging.kafka_config import client_options

if TYPE_CHECKING:
    from collections.abc import Collection

    from service.settings import Settings

NO_LEADER = -1
"""The leader of a partition that has none (yet)."""

LEADER_NOT_AVAILABLE: Final = LeaderNotAvailableError.errno
"""A topic-level error of a topic that exists but whose partitions have no leader yet (made a
moment ago, on a loaded broker): described, with its partitions once the broker knows them."""

DESCRIBE_RETRY_S: Final = 0.1
"""Pause between two looks at a topic made a moment ago, until the broker describes it."""


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
    """Partition -> leader of each topic a metadata response describes as existing: without
    an error, or waiting for its leaders (then its partitions may still be missing). Version 0
    has no `is_internal`; the partitions are last in every version."""
    found: dict[str, dict[int, int]] = {}
    exists = {0, LEADER_NOT_AVAILABLE}
    for error_code, name, *_, partitions in described:
        if error_code in exists and isinstance(name, str) and isinstance(partitions, list | tuple):
            found[name] = {int(p[1]): int(p[2]) for p in partitions}
    return found


async def partitions_of(settings: Settings, topic: str) -> set[int]:
    """The partition numbers of `topic`, from a fresh metadata request; a topic that exists
    but is not described with its partitions yet is asked about again until it is, within the
    Kafka deadline."""
    deadline_s = settings.kafka_timeout.total_seconds()
    try:
        async with asyncio.timeout(deadline_s):
            while True:
                partitions = (await topic_leaders(settings, [topic])).get(topic)
                if partitions is None:
                    msg = f"topic {topic} does not exist (is a worker running?)"
                    raise BrokerUnavailableError(msg)
                if partitions:
                    return set(partitions)
                await asyncio.sleep(DESCRIBE_RETRY_S)
    except TimeoutError as exc:
        msg = f"topic {topic} has no partitions described after {deadline_s:.0f} s"
        raise BrokerUnavailableError(msg) from exc
