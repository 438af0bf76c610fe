"""The offset tracker commits below the oldest unfinished record, per partition."""

from __future__ import annotations

from aiokafka import TopicPartition

from service.messaging.offsets import OffsetTracker

P0 = TopicPartition("t", 0)
P1 = TopicPartition("t", 1)


def test_commit_stops_at_the_oldest_unfinished_offset():
    """Out-of-order completion commits only the contiguous finished prefix."""
    tracker = OffsetTracker()
    for offset in (10, 11, 12):
        tracker.started(P0, offset)
    tracker.finished(P0, 11)
    tracker.finished(P0, 12)
    assert tracker.to_commit([P0]) == {P0: 10}
    tracker.finished(P0, 10)
    assert tracker.to_commit([P0]) == {P0: 13}


def test_nothing_to_commit_twice():
    """After a commit, an unchanged position is not committed again."""
    tracker = OffsetTracker()
    tracker.started(P0, 0)
    tracker.finished(P0, 0)
    positions = tracker.to_commit([P0])
    tracker.committed(positions)
    assert tracker.to_commit([P0]) == {}


def test_partitions_are_independent_and_forgotten_on_revoke():
    """A slow partition does not hold back another; a revoked one has nothing to commit."""
    tracker = OffsetTracker()
    tracker.started(P0, 5)
    tracker.started(P1, 7)
    tracker.finished(P1, 7)
    assert tracker.to_commit([P0, P1]) == {P0: 5, P1: 8}
    tracker.forget([P1])
    assert tracker.to_commit([P1]) == {}
    assert tracker.in_flight(P0) == 1


def test_run_ahead_measures_distance_from_the_oldest_unfinished():
    """Run-ahead bounds how far past a stuck record a partition is read."""
    tracker = OffsetTracker()
    for offset in range(100, 110):
        tracker.started(P0, offset)
    for offset in range(101, 110):
        tracker.finished(P0, offset)
    assert tracker.run_ahead(P0) == 10
    tracker.finished(P0, 100)
    assert tracker.run_ahead(P0) == 0
