"""The host directory's fold (pure): the first record of a key wins, new keys go to the
least-loaded partition, a last record that contradicts the first is written again."""

from __future__ import annotations

import asyncio
from collections import Counter

from inmemory import FakeKafkaConsumer
from waiting import until

from service.errors import BrokerUnavailableError
from service.messaging.polling import BRIEF_POLL_MS, IDLE_POLL_MS
from service.messaging.topics import partition_for
from service.settings import Settings
from service.worker.coordinator.placement import HostDirectory, Placements


def test_the_first_record_of_a_key_wins_and_a_later_one_moves_nothing():
    placements = Placements(12)
    assert placements.take("a.test", 3)
    assert placements.take("a.test", 7)
    assert placements.get("a.test") == 3
    assert placements.spread()[3] == 1
    assert placements.spread()[7] == 0


def test_a_contradicting_last_record_is_reported_once_with_the_first_partition():
    placements = Placements(4)
    placements.take("a.test", 1)
    placements.take("a.test", 2)  # a second coordinator's proposal, written later
    assert placements.contradicted() == {"a.test": 1}
    assert placements.contradicted() == {}


def test_a_rewrite_of_the_first_clears_the_contradiction():
    placements = Placements(4)
    placements.take("a.test", 1)
    placements.take("a.test", 2)
    placements.take("a.test", 1)  # someone wrote the first again: compaction keeps it
    assert placements.contradicted() == {}


def test_a_record_naming_a_partition_the_topic_lacks_is_ignored():
    """A directory left from a larger pages topic: the key is placed again."""
    placements = Placements(4)
    assert not placements.take("a.test", 9)
    assert placements.get("a.test") is None
    assert placements.choose(["a.test"]) == {"a.test": 0}


def test_new_keys_fill_the_least_loaded_partitions_in_turn():
    placements = Placements(12)
    hosts = [f"127.0.0.{n}:8000" for n in range(2, 27)]
    chosen = placements.choose(hosts)
    for host, partition in chosen.items():
        placements.take(host, partition)
    assert sorted(Counter(chosen.values()).values()) == [2] * 11 + [3]
    assert max(placements.spread()) - min(placements.spread()) == 1


def test_the_directory_spreads_hosts_that_the_hash_piles_up():
    """The scaling bench's 25 hosts: hashed, some partition holds 4 or more; placed, at most 3."""
    hosts = [f"127.0.0.{n}" for n in range(2, 27)]
    hashed = Counter(partition_for(host, 12) for host in hosts)
    placed = Counter(Placements(12).choose(hosts).values())
    assert max(hashed.values()) >= 4
    assert max(placed.values()) == 3


def test_choose_skips_keys_already_placed_and_repeated_keys():
    placements = Placements(3)
    placements.take("a.test", 0)
    assert placements.choose(["a.test", "b.test", "b.test", "c.test"]) == {
        "b.test": 1,
        "c.test": 2,
    }


async def test_a_placement_the_broker_did_not_take_is_tried_again():
    """Broker trouble while a new host is placed is waited out, as every other write of a
    run is; before, the run failed with `internal`."""
    settings = Settings(worker_name="unit")
    directory = HostDirectory(
        settings,
        publisher=None,  # type: ignore[arg-type]
        partitions=4,
        client=FakeKafkaConsumer().factory,
    )
    tries: list[dict[str, int]] = []

    async def write(chosen: dict[str, int]) -> None:
        tries.append(chosen)
        if len(tries) == 1:
            raise BrokerUnavailableError("the broker is away")
        for key, partition in chosen.items():  # read back: the first record of each
            directory.placements.take(key, partition)

    directory._write = write  # type: ignore[method-assign]  # noqa: SLF001
    async with asyncio.timeout(5):
        await directory.place(["a.test", "b.test"])
    assert tries == [{"a.test": 0, "b.test": 1}] * 2
    assert (directory.partition("a.test"), directory.partition("b.test")) == (0, 1)


async def test_the_directory_polls_briefly_while_its_start_waits_and_once_a_second_after():
    """Its positions move when a poll returns: the start, which waits for the topic's end,
    gets brief polls; an idle directory waits a second for records (it woke ten times a
    second, for nothing, on every idle worker)."""
    consumer = FakeKafkaConsumer()
    directory = HostDirectory(
        Settings(worker_name="unit"),
        publisher=None,  # type: ignore[arg-type]
        partitions=4,
        client=consumer.factory,
    )
    async with asyncio.timeout(5), directory:
        at_start = len(consumer.polls)
        await until(lambda: len(consumer.polls) >= at_start + 3)
    assert consumer.polls[0] == BRIEF_POLL_MS
    assert set(consumer.polls[at_start:]) == {IDLE_POLL_MS}
