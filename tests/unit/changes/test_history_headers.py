"""A history record's headers carry what a fetcher that takes a partition over indexes:
the hashes and times of the newest observation and the one before it, and its result."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.changes.history import HistoryRecord, PriorObservation
from service.changes.store import decode_record, encode_record, record_headers, slot_of

AT = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)
SHA = "ab" * 32


@pytest.mark.parametrize(
    "before",
    [
        None,
        PriorObservation(fetched_at=AT, sha256=None),
        PriorObservation(fetched_at=AT, sha256=SHA),
    ],
)
@pytest.mark.parametrize("sha", [None, SHA])
def test_the_headers_give_back_the_history(sha: str | None, before: PriorObservation | None):
    record = HistoryRecord(
        key="cd" * 32, url="u", result_id="r" * 32, fetched_at=AT, sha256=sha, before=before
    )
    history = slot_of(dict(record_headers(record)), 7).history()
    assert history.latest.sha256 == sha
    assert history.latest.fetched_at == AT
    assert history.result_id == record.result_id
    if before is None:
        assert history.before is None
    else:
        assert history.before is not None
        assert (history.before.sha256, history.before.fetched_at) == (before.sha256, AT)


def test_a_record_survives_its_compression_with_its_markdown():
    record = HistoryRecord(
        key="cd" * 32, url="u", result_id="r", fetched_at=AT, sha256=SHA, markdown="# Title"
    )
    assert decode_record(encode_record(record)) == record


def test_headers_a_record_lacks_are_an_error_the_reader_skips():
    with pytest.raises(KeyError):
        slot_of({}, 0)
