"""Which held partitions the consumer pauses in the client (`Holds`): only those held for
`HOLD_S`. Pausing at once would drop the records aiokafka fetched ahead, and the partition's
next fetch would wait behind the broker's long poll of the others (500 ms): a fetcher of short
HTTP pages, held every few dozen pages, would idle most of each cycle
(docs/decisions/holding-before-pausing.md)."""

from __future__ import annotations

from aiokafka import TopicPartition

from service.messaging.holds import HOLD_S, Holds

A = TopicPartition("pages", 0)
B = TopicPartition("pages", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_partition_held_briefly_is_not_paused():
    clock = Clock()
    holds = Holds(HOLD_S, clock)

    assert holds.update({A}) == set()
    clock.now += HOLD_S / 2
    assert holds.update({A, B}) == set()


def test_a_partition_held_for_the_whole_hold_is_paused_and_resumed_when_it_has_room():
    clock = Clock()
    holds = Holds(HOLD_S, clock)
    holds.update({A})
    clock.now += HOLD_S / 2
    holds.update({A, B})

    clock.now += HOLD_S / 2
    assert holds.update({A, B}) == {A}
    assert holds.update({B}) == set()  # A has room again
    clock.now += HOLD_S
    assert holds.update({A, B}) == {B}  # A's hold starts again from now


def test_a_release_between_two_holds_starts_the_wait_again():
    clock = Clock()
    holds = Holds(HOLD_S, clock)
    holds.update({A})
    clock.now += HOLD_S * 0.9
    holds.update(set())
    clock.now += HOLD_S * 0.2

    assert holds.update({A}) == set()
