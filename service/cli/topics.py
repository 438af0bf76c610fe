"""`crawlstream topics create` and `crawlstream topics partition KEY`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.messaging.topics import ensure_topics, partition_for, ready_partitions

if TYPE_CHECKING:
    from service.settings import Settings


async def create(settings: Settings) -> int:
    """Create the missing topics, wait until they can be written, print each with its count."""
    created = set(await ensure_topics(settings))
    for name, partitions in (await ready_partitions(settings)).items():
        state = "created" if name in created else "exists"
        print(f"{name}\t{partitions} partitions\t{state}")  # noqa: T201
    return 0


async def partition(settings: Settings, key: str) -> int:
    """Print the partition of each topic that messages keyed `key` are on."""
    for name, partitions in (await ready_partitions(settings)).items():
        print(f"{name}\t{partition_for(key, partitions)}")  # noqa: T201
    return 0
