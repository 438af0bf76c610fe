"""`crawlstream topics create` and `crawlstream topics partition KEY`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.messaging.topics import (
    check_copartitioned,
    ensure_topics,
    partition_for,
    ready_partitions,
)

if TYPE_CHECKING:
    from service.settings import Settings


async def create(settings: Settings) -> int:
    """Create the missing topics (the frontier with the requests topic's partition count),
    wait until they can be written, print each with its count; a frontier topic that is not
    co-partitioned with the requests topic is reported as the worker would refuse it."""
    created = set(await ensure_topics(settings))
    counts = await ready_partitions(settings)
    for name, partitions in counts.items():
        state = "created" if name in created else "exists"
        plural = "" if partitions == 1 else "s"
        print(f"{name}\t{partitions} partition{plural}\t{state}")  # noqa: T201
    check_copartitioned(settings, counts)
    return 0


async def partition(settings: Settings, key: str) -> int:
    """Print the partition of each topic keyed by request_id that messages keyed `key` are
    on (not the pages topic, the host directory, the page cache, the change topics or the
    monitors: they are keyed by host, by page, by URL or by monitor)."""
    not_by_request = {
        settings.pages_topic,
        settings.hosts_topic,
        settings.cache_index_topic,
        settings.cache_bodies_topic,
        settings.change_history_topic,
        settings.changes_topic,
        settings.change_crawls_topic,
        settings.monitors_topic,
        settings.monitor_ticks_topic,
    }
    for name, partitions in (await ready_partitions(settings)).items():
        if name not in not_by_request:
            print(f"{name}\t{partition_for(key, partitions)}")  # noqa: T201
    return 0
