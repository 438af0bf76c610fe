"""The compact set of URL fingerprints a job has admitted."""

from __future__ import annotations

import random

import pytest

from service.frontier import SeenSet, fingerprint
from service.frontier.seen import INITIAL_BITS


def test_an_empty_set_holds_nothing():
    """A new set has no members and one small table."""
    seen = SeenSet()
    assert len(seen) == 0
    assert 1 not in seen
    assert seen.nbytes == 8 << INITIAL_BITS


def test_add_says_whether_the_fingerprint_is_new():
    """The first add of a fingerprint is True, every later one False, and len counts it once."""
    seen = SeenSet()
    assert seen.add(42) is True
    assert seen.add(42) is False
    assert 42 in seen
    assert len(seen) == 1


def test_100_000_urls_are_kept_exactly():
    """100,000 adds give 100,000 members; added values are in, others are not."""
    added = [fingerprint(f"http://example.com/page/{index}") for index in range(100_000)]
    others = [fingerprint(f"http://example.com/other/{index}") for index in range(100_000)]
    seen = SeenSet()
    assert all(seen.add(fp) for fp in added)
    assert len(seen) == 100_000
    assert all(fp in seen for fp in added)
    assert not any(fp in seen for fp in others)
    assert not any(seen.add(fp) for fp in added)
    assert len(seen) == 100_000


def test_the_table_doubles_and_stays_compact():
    """100,000 fingerprints fit a 2 MiB table: about 21 bytes per URL."""
    seen = SeenSet()
    for fp in (fingerprint(f"http://h/{index}") for index in range(100_000)):
        seen.add(fp)
    assert seen.nbytes == 8 * 262_144
    assert seen.nbytes / len(seen) < 22


def test_fingerprints_sharing_bits_are_told_apart():
    """Fingerprints ground to share their low bits all stay members, and only they do."""
    rng = random.Random(3)
    colliding = [(rng.getrandbits(40) << 24) | 7 for _ in range(5_000)]
    seen = SeenSet()
    for fp in colliding:
        seen.add(fp)
    assert len(seen) == len(set(colliding))
    assert all(fp in seen for fp in colliding)
    assert (1 << 63) | 7 not in seen


@pytest.mark.parametrize("fp", [0, -1, 1 << 64])
def test_a_value_that_is_not_a_fingerprint_is_refused(fp):
    """Zero marks an empty slot, and a slot holds 64 bits, so these cannot be added."""
    seen = SeenSet()
    with pytest.raises(ValueError, match="non-zero 64-bit"):
        seen.add(fp)
    assert fp not in seen
    assert len(seen) == 0


def test_the_largest_fingerprint_is_a_member():
    """2**64 - 1 fits its slot."""
    seen = SeenSet()
    assert seen.add((1 << 64) - 1)
    assert (1 << 64) - 1 in seen
    assert "not an int" not in seen
