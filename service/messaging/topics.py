"""The service's topics: create the missing ones, wait for their leaders, find a key's partition.

Every message of a request is keyed by its request_id and lands on the partition Java's
default partitioner picks for that key, `(murmur2(key) & 0x7fffffff) % partitions`: the
workers' producer (aiokafka's default partitioner) computes exactly that.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError, for_code
from aiokafka.partitioner import DefaultPartitioner

from service.errors import BrokerUnavailableError, ConfigurationError
from service.messaging.kafka_config import client_options
from service.messaging.metadata import DESCRIBE_RETRY_S, LEADER_NOT_AVAILABLE, topic_leaders

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from service.settings import Settings

ADMIN_DEADLINE_S: Final = 30.0
"""Deadline for connecting the admin client, creating topics and waiting for their leaders."""

_NOT_YET: Final = frozenset({UnknownTopicOrPartitionError.errno, LEADER_NOT_AVAILABLE})
"""A topic made a moment ago: not yet known to the broker, or without its leaders yet."""

LEADER_POLL_S: Final = 0.2
"""Pause between two looks at new topics that do not have all their leaders yet."""

_FINE: Final = frozenset({0, TopicAlreadyExistsError.errno})
"""No error, or another replica created the topic first: both are what we wanted."""


HOSTS_COMPACTION_LAG_MS: Final = 24 * 3600 * 1000
"""The host directory's `min.compaction.lag.ms` (see `topic_configs`)."""


def wanted_topics(settings: Settings) -> dict[str, int]:
    """Topic name -> partition count."""
    outputs = (
        settings.results_topic,
        settings.progress_topic,
        settings.dead_letter_topic,
        settings.control_topic,
        settings.changes_topic,
        settings.change_crawls_topic,
    )
    return (
        {settings.requests_topic: settings.requests_partitions}
        | dict.fromkeys(outputs, settings.output_partitions)
        | {
            settings.frontier_topic: settings.requests_partitions,  # co-partitioned
            settings.monitors_topic: settings.requests_partitions,
            settings.monitor_ticks_topic: settings.requests_partitions,
            settings.pages_topic: settings.page_partitions,
            settings.cache_index_topic: settings.page_partitions,  # co-partitioned
            settings.cache_bodies_topic: settings.page_partitions,
            settings.change_history_topic: settings.page_partitions,
            settings.hosts_topic: 1,  # one log, so its first record of a key is everyone's
        }
    )


def check_copartitioned(settings: Settings, counts: dict[str, int]) -> None:
    """A coordinator reads frontier partition p for requests partition p: both topics are
    keyed by request_id, so their partition counts must be equal; a fetcher keeps the cache
    entries of page partition p on partition p of the cache topics."""
    for rule in _copartitioned(settings):
        owned = counts.get(rule.owner)
        for partner in rule.partners:
            count = counts.get(partner)
            if owned is not None and count is not None and owned != count:
                raise ConfigurationError(
                    f"topic {partner} has {count} partitions and {rule.owner} has {owned}: "
                    f"they must be equal, because {rule.because}. Recreate {partner} with "
                    f"{owned} partitions{rule.advice}."
                )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Copartitioned:
    """Topics that must have `owner`'s partition count, and why."""

    owner: str
    partners: tuple[str, ...]
    because: str
    advice: str = ""


def _copartitioned(settings: Settings) -> tuple[_Copartitioned, ...]:
    return (
        _Copartitioned(
            owner=settings.requests_topic,
            partners=(settings.frontier_topic,),
            because="a coordinator reads the frontier partition of each requests partition it owns",
            advice=" (`crawlstream topics create` makes them equal), or add partitions to it",
        ),
        _Copartitioned(
            owner=settings.requests_topic,
            partners=(settings.monitors_topic, settings.monitor_ticks_topic),
            because="the coordinator owning requests partition p fires the monitors of partition p",
        ),
        _Copartitioned(
            owner=settings.pages_topic,
            partners=(
                settings.cache_index_topic,
                settings.cache_bodies_topic,
                settings.change_history_topic,
            ),
            because="a page's cache entry (and change history) sits on the partition its "
            "host is placed on",
        ),
    )


def partition_for(key: str | bytes, partitions: int) -> int:
    """The partition of `partitions` that a message keyed `key` goes to (murmur2, as Java)."""
    raw = key.encode() if isinstance(key, str) else key
    partition: int = DefaultPartitioner()(raw, list(range(partitions)), [])
    return partition


def topic_configs(settings: Settings, name: str) -> dict[str, str]:
    """Configs of a topic the service creates: the control topic is compacted (one record per
    request_id is all a reader needs); the frontier keeps its records `CRAWL_FRONTIER_RETENTION`."""
    configs = {"max.message.bytes": str(settings.max_message_bytes + 4096)}
    if name in {settings.control_topic, settings.monitors_topic, settings.monitor_ticks_topic}:
        configs["cleanup.policy"] = "compact"
    if name == settings.hosts_topic:
        # Compacted, but a record stays at least a day: long enough for a reader that sees
        # a placement contradicting an earlier one to write the earlier one again (it wins).
        configs["cleanup.policy"] = "compact"
        configs["min.compaction.lag.ms"] = str(HOSTS_COMPACTION_LAG_MS)
    if name in {settings.cache_index_topic, settings.cache_bodies_topic}:
        configs["cleanup.policy"] = "compact,delete"
        configs["retention.ms"] = str(int(settings.cache_retention.total_seconds() * 1000))
    if name in {settings.change_history_topic, settings.change_crawls_topic}:
        configs["cleanup.policy"] = "compact,delete"
        retention = settings.change_history_retention
        configs["retention.ms"] = str(int(retention.total_seconds() * 1000))
    if name == settings.frontier_topic:
        configs["retention.ms"] = str(int(settings.frontier_retention.total_seconds() * 1000))
    return configs


async def ensure_topics(settings: Settings) -> list[str]:
    """Create every missing topic; existing ones are left as they are. Returns those created.

    The topics whose partition count others follow (requests, pages) are made first; their
    partners then get the count the broker describes, also when another process made the
    topic a moment ago (the first look may not show it yet)."""
    wanted = wanted_topics(settings)
    existing = set(await topic_leaders(settings, wanted))
    async with _admin(settings) as admin:
        owners = {name: wanted[name] for name in _partners(settings) if name in wanted}
        made = await _create(admin, settings, owners, existing)
        existing |= set(owners)  # made here, or by another process since the list
        wanted |= await _partner_counts(admin, settings, set(owners))
        rest = {name: count for name, count in wanted.items() if name not in owners}
        return made + await _create(admin, settings, rest, existing)


async def _create(
    admin: AIOKafkaAdminClient, settings: Settings, wanted: dict[str, int], existing: set[str]
) -> list[str]:
    missing = [
        NewTopic(
            name,
            partitions,
            settings.replication_factor,
            topic_configs=topic_configs(settings, name),
        )
        for name, partitions in wanted.items()
        if name not in existing
    ]
    if missing:
        response = await asyncio.wait_for(admin.create_topics(missing), ADMIN_DEADLINE_S)
        _check_created(response.topic_errors)
    return [topic.name for topic in missing]


def _partners(settings: Settings) -> dict[str, tuple[str, ...]]:
    """Topic -> the topics that must have its partition count (`check_copartitioned`)."""
    return {
        settings.requests_topic: (
            settings.frontier_topic,
            settings.monitors_topic,
            settings.monitor_ticks_topic,
        ),
        settings.pages_topic: (settings.cache_index_topic, settings.cache_bodies_topic),
    }


async def _partner_counts(
    admin: AIOKafkaAdminClient, settings: Settings, existing: set[str]
) -> dict[str, int]:
    """Partition counts for topics to create whose partner exists already: the partner's
    own count, whatever the settings say (a requests topic made by hand with 1 partition
    gets a frontier topic of 1), so a worker never makes a pair it then refuses."""
    partners = {name: made for name, made in _partners(settings).items() if name in existing}
    counts: dict[str, int] = {}
    async with asyncio.timeout(ADMIN_DEADLINE_S):
        while partners:
            for topic in await admin.describe_topics(list(partners)):
                code = topic["error_code"]
                if code and code not in _NOT_YET:
                    error = for_code(int(code))
                    msg = f"cannot describe topic {topic['topic']}: {error.__name__}"
                    raise ConfigurationError(msg)
                if code or not topic["partitions"]:
                    continue  # made a moment ago: not yet described
                for made in partners.pop(topic["topic"]):
                    counts[made] = len(topic["partitions"])
            if partners:
                await asyncio.sleep(DESCRIBE_RETRY_S)
    return counts


async def ready_partitions(settings: Settings) -> dict[str, int]:
    """Partition count of each of the service's topics, once every partition has a leader
    (a producer may then send at once)."""
    names = list(wanted_topics(settings))
    async with _admin(settings) as admin:
        try:
            async with asyncio.timeout(ADMIN_DEADLINE_S):
                while True:
                    counts = _led(await admin.describe_topics(names))
                    if counts is not None:
                        return {name: counts[name] for name in names}  # in the settings' order
                    await asyncio.sleep(LEADER_POLL_S)
        except TimeoutError as exc:
            message = f"topics {', '.join(names)} lack partitions or leaders"
            raise BrokerUnavailableError(f"{message} after {ADMIN_DEADLINE_S:.0f} s") from exc


@asynccontextmanager
async def _admin(settings: Settings) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(**client_options(settings))
    await asyncio.wait_for(admin.start(), ADMIN_DEADLINE_S)
    try:
        yield admin
    finally:
        await asyncio.wait_for(admin.close(), ADMIN_DEADLINE_S)


def _led(described: list[dict[str, Any]]) -> dict[str, int] | None:
    """Partition counts if every topic exists and each of its partitions has a leader."""
    counts = {}
    for topic in described:
        partitions = topic["partitions"]
        if topic["error_code"] or not partitions:
            return None
        if any(partition["error_code"] or partition["leader"] < 0 for partition in partitions):
            return None
        counts[topic["topic"]] = len(partitions)
    return counts


def _check_created(topic_errors: list[tuple[object, ...]]) -> None:
    for name, code, *_ in topic_errors:
        if code not in _FINE:
            error = for_code(int(str(code)))
            raise ConfigurationError(f"cannot create topic {name}: {error.__name__}")
