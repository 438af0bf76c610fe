"""What the dispatcher may commit while receivers finish out of order (pure)."""

from __future__ import annotations

from service.webhooks.ledger import PartitionLedger


def test_the_position_stops_at_the_first_event_not_yet_delivered():
    ledger = PartitionLedger()
    assert ledger.due() is None
    for offset in (10, 11, 12):
        ledger.take(offset)
    ledger.done(11)
    ledger.done(12)
    assert ledger.due() == 10  # a slow receiver still holds 10: nothing above it commits
    ledger.committed = 10
    assert ledger.due() is None
    ledger.done(10)
    assert ledger.due() == 13
    ledger.committed = 13
    assert ledger.due() is None
