"""Whose the proxy's connections are and which one to close: per-owner limits and fair shares."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from service.egress.owners import ConnectionOwners


@dataclass(eq=False)
class Conn:
    name: str
    last_active: float


def _fill(owners: ConnectionOwners[Conn], owner: str, count: int, start: float = 0.0) -> list:
    made = [Conn(f"{owner}{i}", start + i) for i in range(count)]
    for conn in made:
        assert owners.attribute(conn, owner) is None
    return made


def test_an_owner_past_its_limit_loses_its_least_recently_active_connection():
    """The newcomer stays; the owner's oldest-idle connection is the one to close."""
    owners: ConnectionOwners[Conn] = ConnectionOwners(capacity=100, per_owner=3)
    a = _fill(owners, "a", 3)
    a[0].last_active = 50.0  # it moved a byte lately: no longer the least active
    newcomer = Conn("a-new", 60.0)
    assert owners.attribute(newcomer, "a") is a[1]
    assert owners.held("a") == 3
    assert owners.evicted_total == 1


def test_other_owners_are_untouched_by_one_owners_limit():
    owners: ConnectionOwners[Conn] = ConnectionOwners(capacity=100, per_owner=2)
    b = _fill(owners, "b", 2)
    _fill(owners, "a", 2)
    victim = owners.attribute(Conn("a-new", 9.0), "a")
    assert victim is not None
    assert victim not in b
    assert owners.held("b") == 2


def test_an_exempt_owner_has_no_limit():
    owners: ConnectionOwners[Conn] = ConnectionOwners(
        capacity=100, per_owner=1, exempt=frozenset({"worker"})
    )
    _fill(owners, "worker", 10)
    assert owners.held("worker") == 10


def test_a_full_proxy_takes_room_from_the_greediest_owner_past_its_fair_share():
    """Capacity 10: a holds 7, b holds 2; a newcomer's fair share is 10 // 3 = 3, so a's least
    recently active connection makes room."""
    owners: ConnectionOwners[Conn] = ConnectionOwners(capacity=10, per_owner=10)
    a = _fill(owners, "a", 7)
    _fill(owners, "b", 2, start=-10.0)  # older than all of a's: still not chosen
    assert owners.victim_for_newcomer() is a[0]
    assert owners.held("a") == 6


def test_a_full_proxy_refuses_when_no_owner_holds_more_than_its_share():
    owners: ConnectionOwners[Conn] = ConnectionOwners(capacity=6, per_owner=10)
    _fill(owners, "a", 2)
    _fill(owners, "b", 2)
    assert owners.victim_for_newcomer() is None  # fair share 6 // 3 = 2
    assert ConnectionOwners[Conn](capacity=6).victim_for_newcomer() is None


def test_a_forgotten_connection_no_longer_counts():
    owners: ConnectionOwners[Conn] = ConnectionOwners(capacity=10, per_owner=2)
    a = _fill(owners, "a", 2)
    owners.forget(a[0])
    owners.forget(a[0])  # twice is harmless
    owners.forget(Conn("never", 0.0))
    assert owners.held("a") == 1
    assert owners.attribute(Conn("a-new", 5.0), "a") is None


def test_an_owner_needs_at_least_one_connection():
    with pytest.raises(ValueError, match="at least one"):
        ConnectionOwners[Conn](capacity=10, per_owner=0)
