"""The offset tracker commits below the oldest unfinished record, per partition, and carries
what is done above it and how often each unfinished record was delivered in the metadata."""

from __future__ import annotations

from aiokafka import TopicPartition

from service.messaging.offsets import (
    MAX_METADATA_CHARS,
    OffsetTracker,
    Verdict,
    decode_metadata,
    encode_metadata,
)

P0 = TopicPartition("t", 0)
P1 = TopicPartition("t", 1)


def _positions(commits: dict[TopicPartition, tuple[int, str]]) -> dict[TopicPartition, int]:
    return {tp: position for tp, (position, _) in commits.items()}


def test_commit_stops_at_the_oldest_unfinished_offset():
    """Out-of-order completion commits only the contiguous finished prefix."""
    tracker = OffsetTracker()
    for offset in (10, 11, 12):
        tracker.delivered(P0, offset)
    tracker.finished(P0, 11)
    tracker.finished(P0, 12)
    assert _positions(tracker.to_commit([P0])) == {P0: 10}
    tracker.finished(P0, 10)
    assert _positions(tracker.to_commit([P0])) == {P0: 13}


def test_nothing_to_commit_twice():
    """After a commit, an unchanged position and metadata are not committed again."""
    tracker = OffsetTracker()
    tracker.delivered(P0, 0)
    tracker.finished(P0, 0)
    commits = tracker.to_commit([P0])
    tracker.committed(commits)
    assert tracker.to_commit([P0]) == {}


def test_partitions_are_independent_and_forgotten_on_revoke():
    """A slow partition does not hold back another; a revoked one has nothing to commit."""
    tracker = OffsetTracker()
    tracker.delivered(P0, 5)
    tracker.delivered(P1, 7)
    tracker.finished(P1, 7)
    assert _positions(tracker.to_commit([P0, P1])) == {P0: 5, P1: 8}
    tracker.forget([P1])
    assert tracker.to_commit([P1]) == {}
    assert tracker.in_flight(P0) == 1


def test_run_ahead_measures_distance_from_the_oldest_unfinished():
    """Run-ahead bounds how far past a stuck record a partition is read."""
    tracker = OffsetTracker()
    for offset in range(100, 110):
        tracker.delivered(P0, offset)
    for offset in range(101, 110):
        tracker.finished(P0, offset)
    assert tracker.run_ahead(P0) == 10
    tracker.finished(P0, 100)
    assert tracker.run_ahead(P0) == 0


def test_run_ahead_does_not_count_from_records_set_aside():
    """A record waiting for its host's pace does not hold its partition's run-ahead."""
    tracker = OffsetTracker()
    for offset in range(100, 110):
        tracker.delivered(P0, offset)
    assert tracker.run_ahead(P0, aside={100, 101}) == 8
    assert tracker.run_ahead(P0, aside=set(range(100, 110))) == 0
    assert tracker.to_commit([P0])[P0][0] == 100  # still uncommitted


def test_the_next_owner_skips_what_was_done_above_the_committed_offset():
    """Completed requests behind an unfinished one are not run again after a failover."""
    first = OffsetTracker()
    for offset in range(20, 25):
        first.delivered(P0, offset)
    for offset in (21, 23, 24):
        first.finished(P0, offset)
    position, metadata = first.to_commit([P0])[P0]
    assert position == 20

    second = OffsetTracker()
    second.restore(P0, position, metadata)
    verdicts = [second.delivered(P0, offset).verdict for offset in range(20, 26)]
    assert verdicts == [Verdict.RUN, Verdict.SKIP, Verdict.RUN, Verdict.SKIP, Verdict.SKIP,
                        Verdict.RUN]  # fmt: skip
    second.finished(P0, 20)
    second.finished(P0, 22)
    assert _positions(second.to_commit([P0])) == {P0: 25}


def test_a_record_whose_worker_keeps_dying_is_poison_after_max_deliveries():
    """Deliveries survive in the metadata; the one after `max_deliveries` is quarantined."""
    metadata = ""
    verdicts = []
    for _ in range(4):
        owner = OffsetTracker(max_deliveries=3)
        owner.restore(P0, 7, metadata)
        verdicts.append(owner.delivered(P0, 7))
        _, metadata = owner.to_commit([P0])[P0]  # committed before the record runs; then dies
    assert [d.count for d in verdicts] == [1, 2, 3, 4]
    assert [d.verdict for d in verdicts] == [Verdict.RUN] * 3 + [Verdict.POISON]


def test_a_record_handed_back_on_purpose_is_not_counted():
    """Rebalance or shutdown hands work back: that delivery does not count against it."""
    owner = OffsetTracker(max_deliveries=1)
    owner.restore(P0, 3, "")
    owner.delivered(P0, 3)
    _, metadata = owner.to_commit([P0], handing_back=True)[P0]
    again = OffsetTracker(max_deliveries=1)
    again.restore(P0, 3, metadata)
    assert again.delivered(P0, 3).verdict is Verdict.RUN


def test_metadata_round_trips_and_ignores_foreign_text():
    """The encoding is compact and anything that is not ours decodes to nothing."""
    done = {101, 102, 140}
    text = encode_metadata(100, done, {100: 2, 103: 1}, suspects={104})
    assert decode_metadata(text, 100) == (done, {100: 2, 103: 1}, set(), {104})
    assert decode_metadata("written by another tool", 100) == (set(), {}, set(), set())
    assert decode_metadata('{"v": 99, "done": "AA=="}', 100) == (set(), {}, set(), set())


def test_metadata_stays_within_the_brokers_limit():
    """Even with the largest run-ahead, the metadata fits `offset.metadata.max.bytes`."""
    done = set(range(1, 4097, 2))
    deliveries = dict.fromkeys(range(0, 4097, 64), 2)
    text = encode_metadata(0, done, deliveries)
    assert len(text) <= MAX_METADATA_CHARS
    assert decode_metadata(text, 0) == (done, deliveries, set(), set())


def test_a_record_fetched_again_while_it_runs_is_not_started_twice():
    """A re-fetch of an offset still in flight here is ignored and not counted."""
    tracker = OffsetTracker()
    assert tracker.delivered(P0, 4).verdict is Verdict.RUN
    again = tracker.delivered(P0, 4)
    assert (again.verdict, again.count) == (Verdict.RUNNING, 1)
    assert tracker.in_flight(P0) == 1


def _next_owner(metadata: str, position: int, max_deliveries: int = 3) -> OffsetTracker:
    owner = OffsetTracker(max_deliveries=max_deliveries)
    owner.restore(P0, position, metadata)
    return owner


def test_a_delivery_taken_without_a_charge_is_not_counted_unless_charged():
    """`charge=False`: a worker that dies before the risky part began is not blamed; once
    `charge()` is called, it is."""
    waited = OffsetTracker(max_deliveries=1)
    waited.restore(P0, 5, "")
    assert waited.delivered(P0, 5, charge=False).count == 1
    _, metadata = waited.to_commit([P0])[P0]
    again = _next_owner(metadata, 5, max_deliveries=1).delivered(P0, 5)
    assert (again.verdict, again.count, again.earlier) == (Verdict.RUN, 1, False)

    rendered = OffsetTracker(max_deliveries=1)
    rendered.restore(P0, 5, "")
    rendered.delivered(P0, 5, charge=False)
    rendered.charge(P0, 5)
    _, metadata = rendered.to_commit([P0])[P0]
    again = _next_owner(metadata, 5, max_deliveries=1).delivered(P0, 5)
    assert (again.verdict, again.count, again.earlier) == (Verdict.POISON, 2, True)


def test_charging_a_record_not_in_flight_does_nothing():
    """A late `charge()` (the record finished, or was never taken) counts nothing."""
    tracker = OffsetTracker()
    tracker.delivered(P0, 1, charge=False)
    tracker.finished(P0, 1)
    tracker.charge(P0, 1)
    tracker.charge(P0, 9)
    assert tracker.to_commit([P0])[P0] == (2, encode_metadata(2, set(), {}))


def test_a_relieved_delivery_is_uncounted_and_marked_earlier():
    """`relieve()`: what the record still does cannot kill the worker, so its delivery is
    not counted; the next owner still learns it was delivered before."""
    owner = OffsetTracker(max_deliveries=1)
    owner.restore(P0, 8, "")
    assert owner.delivered(P0, 8).count == 1
    owner.relieve(P0, 8)
    _, metadata = owner.to_commit([P0])[P0]
    again = _next_owner(metadata, 8, max_deliveries=1).delivered(P0, 8)
    assert (again.verdict, again.count, again.earlier) == (Verdict.RUN, 1, True)


def test_relieving_keeps_the_charges_of_earlier_deliveries():
    """Only this delivery is uncounted: a record charged twice before keeps those two."""
    metadata = encode_metadata(4, set(), {4: 2})
    owner = _next_owner(metadata, 4)
    assert owner.delivered(P0, 4).count == 3
    owner.relieve(P0, 4)
    _, metadata = owner.to_commit([P0])[P0]
    assert decode_metadata(metadata, 4) == (set(), {4: 2}, {4}, set())


def test_a_record_handed_back_is_marked_delivered_before():
    """A record handed back on purpose is not counted, but its next delivery is `earlier`:
    the run that held it may have dispatched pages."""
    owner = OffsetTracker(max_deliveries=1)
    owner.restore(P0, 3, "")
    first = owner.delivered(P0, 3)
    assert first.earlier is False
    _, metadata = owner.to_commit([P0], handing_back=True)[P0]
    again = _next_owner(metadata, 3, max_deliveries=1).delivered(P0, 3)
    assert (again.verdict, again.count, again.earlier) == (Verdict.RUN, 1, True)


def test_a_finished_record_is_no_longer_earlier():
    """Finishing a record drops what was kept about its deliveries."""
    owner = _next_owner(encode_metadata(3, set(), {}, {3, 4}), 3)
    owner.delivered(P0, 3)
    owner.finished(P0, 3)
    position, metadata = owner.to_commit([P0])[P0]
    assert decode_metadata(metadata, position) == (set(), {}, {4}, set())


def test_metadata_round_trips_the_offsets_seen_before():
    """The `seen` key carries the uncharged earlier deliveries above the position only."""
    text = encode_metadata(100, {102}, {101: 1}, {99, 100, 103})
    assert '"seen":[0,3]' in text
    assert decode_metadata(text, 100) == ({102}, {101: 1}, {100, 103}, set())


def test_a_death_beside_others_makes_a_suspect_and_only_deaths_alone_count():
    """A page record charged beside others is not counted: its next delivery is a suspect
    (it renders alone); a death while it renders alone is counted towards `poison`."""
    beside = OffsetTracker(max_deliveries=1)
    beside.restore(P0, 5, "")
    beside.delivered(P0, 5, charge=False)
    beside.charge(P0, 5, alone=False)
    _, metadata = beside.to_commit([P0])[P0]  # the worker dies here
    owner = _next_owner(metadata, 5, max_deliveries=1)
    again = owner.delivered(P0, 5, charge=False)
    assert (again.verdict, again.count, again.suspect) == (Verdict.RUN, 1, True)

    owner.charge(P0, 5, alone=True)
    _, metadata = owner.to_commit([P0])[P0]  # dies again, the page alone
    last = _next_owner(metadata, 5, max_deliveries=1).delivered(P0, 5, charge=False)
    assert (last.verdict, last.count, last.suspect) == (Verdict.POISON, 2, True)


def test_a_page_that_rendered_beside_others_and_ended_is_no_suspect():
    """Relieved (its render ended), a page charged beside others is not marked; handed
    back on purpose (shutdown), neither."""
    tracker = OffsetTracker(max_deliveries=1)
    tracker.restore(P0, 5, "")
    tracker.delivered(P0, 5, charge=False)
    tracker.delivered(P0, 6, charge=False)
    tracker.charge(P0, 5, alone=False)
    tracker.relieve(P0, 5)
    tracker.charge(P0, 6, alone=False)
    _, metadata = tracker.to_commit([P0], handing_back=True)[P0]
    owner = _next_owner(metadata, 5, max_deliveries=1)
    assert not owner.delivered(P0, 5, charge=False).suspect
    assert not owner.delivered(P0, 6, charge=False).suspect
