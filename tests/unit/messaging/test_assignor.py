"""The requests consumer's assignor: one protocol, state of its own per consumer."""

from __future__ import annotations

from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.structs import TopicPartition

from service.messaging._assignor import PROTOCOL, learn_generation, sticky_assignor


def test_each_consumer_gets_a_sticky_assignor_of_its_own():
    """Two consumers in one process do not share the assignment or generation aiokafka keeps
    on the assignor class."""
    first, second = sticky_assignor(), sticky_assignor()
    first.member_assignment = [TopicPartition("t", 0)]
    learn_generation(first, 7)
    assert second.member_assignment is None
    assert second.generation == StickyPartitionAssignor.DEFAULT_GENERATION_ID
    assert StickyPartitionAssignor.generation == StickyPartitionAssignor.DEFAULT_GENERATION_ID
    assert first.generation == 7


def test_the_protocol_stays_the_one_earlier_workers_offered_first():
    """A rolling upgrade keeps one group: the protocol name is aiokafka's "sticky"."""
    assert sticky_assignor().name == PROTOCOL == "sticky"


def test_a_learned_generation_goes_into_the_join_metadata():
    """After an assignment, the member's join metadata names the generation it came from, so
    the leader prefers the current owner's claim over an older one."""
    assignor = sticky_assignor()
    assignor.member_assignment = [TopicPartition("t", 1)]
    learn_generation(assignor, 3)
    metadata = assignor.parse_member_metadata(assignor.metadata(["t"]))
    assert metadata.generation == 3
    assert metadata.partitions == [TopicPartition("t", 1)]
