"""The egress proxy's connection cap: counting, refusing and rate-limited reporting."""

from __future__ import annotations

import pytest

from service.egress.slots import ConnectionSlots


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_connections_are_admitted_up_to_the_cap_and_refused_beyond():
    slots = ConnectionSlots(capacity=3)
    assert [slots.admit() for _ in range(5)] == [True, True, True, False, False]
    assert slots.open == 3
    assert slots.refused_total == 2


def test_a_released_slot_admits_the_next_connection():
    slots = ConnectionSlots(capacity=1)
    assert slots.admit()
    assert not slots.admit()
    slots.release()
    assert slots.open == 0
    assert slots.admit()
    assert slots.refused_total == 1


def test_releasing_more_than_was_admitted_is_a_bug():
    slots = ConnectionSlots(capacity=1)
    with pytest.raises(RuntimeError):
        slots.release()


def test_a_cap_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        ConnectionSlots(capacity=0)


def test_refusals_are_reported_at_most_once_per_interval_and_none_is_lost():
    """The first refusal is reported at once; refusals within the interval wait for the
    next report, which carries their number."""
    clock = Clock()
    slots = ConnectionSlots(capacity=1, report_interval_s=10.0, clock=clock)
    assert slots.refusals_to_report() == 0
    slots.admit()
    slots.admit()
    assert slots.refusals_to_report() == 1
    for _ in range(25_000):
        slots.admit()
        assert slots.refusals_to_report() == 0
    clock.now += 9.9
    assert slots.refusals_to_report() == 0
    clock.now += 0.1
    assert slots.refusals_to_report() == 25_000
    assert slots.refusals_to_report() == 0
    clock.now += 60
    assert slots.refusals_to_report() == 0
    assert slots.refused_total == 25_001
