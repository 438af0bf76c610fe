"""The cancel registry and the control-record parser: pure, driven with a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service.contracts import CancelControl, dump
from service.control import Applied, Cancel, CancelRegistry, ControlAction, parse_control

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WEEK = timedelta(days=7)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def cancel(request_id: str, at: datetime = NOW, reason: str | None = None) -> ControlAction:
    return ControlAction(cancel=Cancel(request_id=request_id, reason=reason, at=at))


def test_a_cancel_is_remembered_and_its_listeners_hear_of_it_at_once():
    """`apply` stores the cancel and tells every listener; `lookup` finds it later."""
    heard: list[Cancel] = []
    registry = CancelRegistry(WEEK, clock=Clock())
    registry.listen(heard.append)
    registry.apply(cancel("r-1", reason="user"))
    assert [c.request_id for c in heard] == ["r-1"]
    found = registry.lookup("r-1")
    assert found is not None
    assert found.detail == "cancelled: user"
    assert registry.lookup("r-2") is None


def test_a_cancel_past_retention_is_ignored_and_forgotten():
    """A cancel older than the retention is neither applied nor found, and prune drops it."""
    clock = Clock()
    registry = CancelRegistry(WEEK, clock=clock)
    assert registry.apply(cancel("old", at=NOW - WEEK - timedelta(seconds=1))) == Applied.EXPIRED
    assert registry.lookup("old") is None
    registry.apply(cancel("young", at=NOW))
    clock.now = NOW + WEEK
    assert registry.lookup("young") is None
    registry.apply(cancel("later", at=NOW + WEEK))
    clock.now = NOW + 2 * WEEK
    assert registry.prune() == 1
    assert len(registry) == 0


def test_a_tombstone_forgets_the_cancel():
    """A record without a value (compaction's tombstone) forgets the request_id."""
    registry = CancelRegistry(WEEK, clock=Clock())
    registry.apply(cancel("r-1"))
    registry.apply(parse_control(b"r-1", None))
    assert registry.lookup("r-1") is None


def test_the_registry_is_bounded_and_forgets_the_oldest_first():
    """Beyond its capacity the first-arrived cancels are forgotten."""
    registry = CancelRegistry(WEEK, capacity=2, clock=Clock())
    for request_id in ("a", "b", "c"):
        registry.apply(cancel(request_id))
    assert len(registry) == 2
    assert registry.lookup("a") is None
    assert registry.lookup("c") is not None


def test_parse_reads_a_cancel_and_skips_unknown_kinds_and_garbage():
    """A valid cancel parses; an unknown `type` and malformed JSON are skipped with a reason,
    never raised (one bad record must not stop the reader)."""
    message = CancelControl(request_id="r-1", reason="why", at=NOW)
    action = parse_control(b"r-1", dump(message))
    assert action.cancel == Cancel(request_id="r-1", reason="why", at=NOW)
    unknown = parse_control(b"r-1", b'{"type": "pause", "request_id": "r-1"}')
    assert unknown.skip is not None
    assert unknown.skip.detail == "unknown control type 'pause'"
    assert parse_control(b"r-1", b"not json").skip is not None
    assert parse_control(b"r-1", b'{"type": "cancel"}').skip is not None
    assert parse_control(None, None).skip is not None
