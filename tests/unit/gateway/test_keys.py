"""API keys and the admission arithmetic (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from service.errors import ConfigurationError
from service.gateway.keys import KeyEntry, KeyRing, admit

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ACME = KeyEntry(key="fc-acme-0001", tenant="acme", max_concurrent_jobs=2, pages_per_minute=3)


def test_the_keys_file_is_read_and_a_bearer_token_finds_its_tenant(tmp_path):
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [ACME.model_dump()]}))
    ring = KeyRing.load(path)
    assert not ring.open
    assert ring.lookup("Bearer fc-acme-0001") == ACME
    assert ring.lookup("bearer fc-acme-0001 ") == ACME
    assert ring.lookup("Bearer fc-acme-0002") is None
    assert ring.lookup(None) is None
    assert ring.lookup("fc-acme-0001") is None


def test_without_a_file_the_ring_is_open_and_a_bad_file_stops_the_start(tmp_path):
    assert KeyRing.load(None).open
    path = tmp_path / "keys.json"
    path.write_text('{"keys": [{"key": "short", "tenant": "t"}]}')
    with pytest.raises(ConfigurationError, match=r"keys\.json"):
        KeyRing.load(path)


def test_too_many_jobs_at_once_is_refused_with_a_retry_after():
    assert admit(ACME, active=1, recent_pages=[], now=NOW).allowed
    verdict = admit(ACME, active=2, recent_pages=[], now=NOW)
    assert not verdict.allowed
    assert verdict.retry_after_s > 0
    assert "2 jobs" in verdict.reason


def test_pages_per_minute_waits_until_enough_pages_leave_the_window():
    pages = [NOW - timedelta(seconds=s) for s in (50, 30, 10, 70)]
    verdict = admit(ACME, active=0, recent_pages=pages, now=NOW)
    assert not verdict.allowed
    assert verdict.retry_after_s == 10  # the page 50 s ago leaves the window in 10 s
    assert admit(ACME, active=0, recent_pages=pages[1:], now=NOW).allowed
    assert admit(None, active=99, recent_pages=pages * 10, now=NOW).allowed
