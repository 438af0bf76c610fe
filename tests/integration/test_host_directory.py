"""The host directory on a real broker: coordinators that place the same new hosts at once
agree on every one, hosts spread evenly, a directory started later reads the same, and a
last record that contradicts the first is written again so compaction keeps the first.

Real broker, no worker: `HostDirectory` instances with publishers of their own, as three
coordinators would have.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from service.messaging.publisher import Publisher
from service.messaging.topics import ensure_topics
from service.worker.coordinator.placement import HostDirectory, Placement

pytestmark = pytest.mark.integration

PARTITIONS = 12
HOSTS = [f"127.0.0.{n}:8080" for n in range(2, 27)]

PLACE_DEADLINE_S = 90.0
"""A placement waits out broker trouble; here that is a failure, not a wait of the test's
whole timeout."""


@contextlib.asynccontextmanager
async def _directory(settings):
    async with (
        Publisher(settings) as publisher,
        HostDirectory(settings, publisher, PARTITIONS) as directory,
    ):
        yield directory


async def test_coordinators_placing_the_same_hosts_at_once_agree_and_spread_them(topics):
    settings = topics.settings()
    await ensure_topics(settings)
    async with (
        _directory(settings) as one,
        _directory(settings) as two,
        _directory(settings) as three,
    ):
        async with asyncio.timeout(PLACE_DEADLINE_S):
            await asyncio.gather(
                one.place(HOSTS),
                two.place(list(reversed(HOSTS))),
                three.place(HOSTS[5:] + HOSTS[:5]),
            )
        placed = [{host: d.partition(host) for host in HOSTS} for d in (one, two, three)]
    assert None not in placed[0].values()
    assert placed[0] == placed[1] == placed[2]
    async with _directory(settings) as later:  # reads the log from its start
        assert {host: later.partition(host) for host in HOSTS} == placed[0]
        assert later.placements.spread() == one.placements.spread()


async def test_hosts_placed_one_after_another_spread_evenly_over_the_partitions(topics):
    settings = topics.settings()
    await ensure_topics(settings)
    async with _directory(settings) as directory:
        async with asyncio.timeout(PLACE_DEADLINE_S):
            for host in HOSTS:
                await directory.place([host])
        spread = directory.placements.spread()
    assert sorted(spread) == [2] * 11 + [3]


async def test_a_contradicting_last_record_is_followed_by_the_first_again(topics):
    """Compaction keeps a key's last record: a reader that sees the last contradict the
    first writes the first again, so a directory that reads the topic afterwards finds the
    last record agreeing with the first and writes nothing."""
    settings = topics.settings()
    await ensure_topics(settings)
    async with Publisher(settings) as publisher:
        for partition in (5, 9):
            value = Placement(partition=partition).model_dump_json().encode()
            await publisher.send_and_wait(settings.hosts_topic, "a.test:80", value)
    async with _directory(settings) as directory:
        assert directory.partition("a.test:80") == 5
        assert directory.rewrites == 1
    async with asyncio.timeout(PLACE_DEADLINE_S):
        while True:  # the rewrite is sent, not waited for: until a reader sees it
            async with _directory(settings) as later:
                assert later.partition("a.test:80") == 5
                if later.rewrites == 0:
                    break
            await asyncio.sleep(0.2)
