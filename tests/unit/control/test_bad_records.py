"""Bad control records of every kind (naive, far-future, malformed, huge) are skipped,
counted by reason and logged once; none raises, none stops the records after it; reading many
cancels at start logs one summary line, each cancel at debug only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from service.contracts import CancelControl, dump
from service.control import (
    Applied,
    Cancel,
    CancelRegistry,
    ControlAction,
    ControlRecords,
    SkipReason,
    parse_control,
)
from service.control.records import MAX_SKIP_WARNINGS_AT_START
from service.control.registry import MAX_CONTROL_BYTES
from service.metrics import Metrics

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
WEEK = timedelta(days=7)
METRIC = "crawl_control_records_skipped_total"


@dataclass(frozen=True, slots=True)
class Record:
    """A control record as the reader gets it."""

    key: bytes | None
    value: bytes | None
    partition: int = 0
    offset: int = 0


def _cancel_json(request_id: str = "r-1", **fields: object) -> bytes:
    return json.dumps(
        {"schema_version": 1, "type": "cancel", "request_id": request_id} | fields
    ).encode()


BAD_RECORDS = {
    "naive at": (_cancel_json(at="2026-12-01T08:00:00"), SkipReason.INVALID),
    "far-future at": (_cancel_json(at="9999-12-31T23:59:59Z"), SkipReason.INVALID),
    "year 1 with an offset": (_cancel_json(at="0001-01-01T00:00:00+01:00"), SkipReason.INVALID),
    "not json": (b'{"type": "cancel", "request_id": ', SkipReason.NOT_JSON),
    "not utf-8": (b"\xff\xfe\x00", SkipReason.NOT_JSON),
    "a json array": (b"[1, 2]", SkipReason.INVALID),
    "a bad request_id": (_cancel_json("no spaces allowed"), SkipReason.INVALID),
    "an unknown field": (_cancel_json(priority=1), SkipReason.INVALID),
    "an unknown type": (b'{"type": "pause", "request_id": "r-1"}', SkipReason.UNKNOWN_TYPE),
    "nested deeply, small": (b"[" * 10_000, SkipReason.NOT_JSON),
    "nested deeply, 1 MB": (b'{"a":' * 200_000 + b"1" + b"}" * 200_000, SkipReason.TOO_LARGE),
    "huge, 2 MB reason": (_cancel_json(reason="x" * 2_000_000), SkipReason.TOO_LARGE),
}
"""A value of each kind of bad record and the reason it is skipped for."""


def _records(clock_now: datetime = NOW) -> tuple[ControlRecords, CancelRegistry, CollectorRegistry]:
    prometheus = CollectorRegistry()
    registry = CancelRegistry(WEEK, clock=lambda: clock_now)
    return (
        ControlRecords(registry, Metrics(prometheus).control_records_skipped),
        registry,
        prometheus,
    )


def _skipped(prometheus: CollectorRegistry, reason: SkipReason) -> float | None:
    return prometheus.get_sample_value(METRIC, {"reason": str(reason)})


@pytest.mark.parametrize("kind", sorted(BAD_RECORDS))
def test_parse_skips_each_bad_record_with_its_reason_and_never_raises(kind: str):
    """`parse_control` reads no cancel from a bad record, and says why in a bounded line."""
    value, reason = BAD_RECORDS[kind]
    action = parse_control(b"r-1", value)
    assert action.cancel is None
    assert action.skip is not None
    assert action.skip.reason == reason
    assert len(action.skip.detail) <= 300


def test_a_record_of_exactly_the_limit_is_still_read():
    """The size bound skips only what is larger than any cancel: the longest cancel the
    contract allows parses, and so does one padded to exactly the limit."""
    longest = dump(CancelControl(request_id="r" * 128, reason="\u2028" * 500, at=NOW))
    assert len(longest) < MAX_CONTROL_BYTES
    assert parse_control(b"r-1", longest).cancel is not None
    padded = longest + b" " * (MAX_CONTROL_BYTES - len(longest))
    assert parse_control(b"r-1", padded).cancel is not None
    assert parse_control(b"r-1", padded + b" ").skip is not None


@pytest.mark.parametrize("kind", sorted(BAD_RECORDS))
def test_each_bad_record_is_skipped_counted_and_warned_once_and_the_next_cancel_applies(kind: str):
    """Taking a bad record: skipped, counted under its reason, one warning naming it; the
    registry holds nothing of it, and a good cancel after it is applied."""
    value, reason = BAD_RECORDS[kind]
    records, registry, prometheus = _records()
    records.started()
    with capture_logs() as logs:
        assert records.take(Record(b"r-1", value, offset=7)) is Applied.SKIPPED
    assert [(e["event"], e["log_level"], e["reason"], e["offset"]) for e in logs] == [
        ("control.skipped", "warning", str(reason), 7)
    ]
    assert _skipped(prometheus, reason) == 1
    assert len(registry) == 0
    good = dump(CancelControl(request_id="r-2", at=NOW))
    assert records.take(Record(b"r-2", good)) is Applied.CANCELLED
    assert registry.lookup("r-2") is not None


def test_every_skip_reason_is_exported_at_zero_from_the_start():
    """An alert on the rate of skipped records has a series before the first one."""
    _, _, prometheus = _records()
    for reason in SkipReason:
        assert _skipped(prometheus, reason) == 0


def test_a_tombstone_without_a_key_is_skipped_and_one_with_a_key_forgets():
    """A null value withdraws its key's cancel; without a key there is nothing to withdraw."""
    records, registry, prometheus = _records()
    records.take(Record(b"r-1", dump(CancelControl(request_id="r-1", at=NOW))))
    assert records.take(Record(None, None)) is Applied.SKIPPED
    assert _skipped(prometheus, SkipReason.NO_KEY) == 1
    assert records.take(Record(b"r-1", None)) is Applied.FORGOTTEN
    assert registry.lookup("r-1") is None


def test_a_record_whose_apply_raises_is_skipped_with_its_traceback_and_the_reader_goes_on():
    """A listener that raises (a bug) costs that record only: logged with its traceback,
    counted as `failed`; the next cancel is applied and heard."""
    records, registry, prometheus = _records()
    heard: list[str] = []

    def listener(cancel: Cancel) -> None:
        if cancel.request_id == "boom":
            raise RuntimeError("a bug")
        heard.append(cancel.request_id)

    registry.listen(listener)
    with capture_logs() as logs:
        assert records.take(Record(b"boom", dump(CancelControl(request_id="boom", at=NOW)))) is (
            Applied.SKIPPED
        )
        assert records.take(Record(b"ok", dump(CancelControl(request_id="ok", at=NOW)))) is (
            Applied.CANCELLED
        )
    [failed] = [e for e in logs if e["event"] == "control.apply_failed"]
    assert failed["log_level"] == "error"
    assert failed["exc_info"] is True
    assert _skipped(prometheus, SkipReason.FAILED) == 1
    assert heard == ["ok"]


def test_the_registry_never_overflows_on_a_cancel_of_year_9999():
    """A cancel built outside the contract at the end of time: `at + retention` overflowed;
    the registry now compares a difference, so apply, lookup and prune all answer."""
    registry = CancelRegistry(WEEK, clock=lambda: NOW)
    far = Cancel(request_id="far", reason=None, at=datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC))
    assert registry.apply(ControlAction(cancel=far)) is Applied.CANCELLED
    assert registry.lookup("far") == far
    assert registry.prune() == 0
    ancient = Cancel(request_id="old", reason=None, at=datetime(1, 1, 1, tzinfo=UTC))
    assert registry.apply(ControlAction(cancel=ancient)) is Applied.EXPIRED


def test_reading_many_cancels_at_start_logs_one_summary_and_each_cancel_at_debug():
    """1,000 cancels (10 of them past retention) and 30 bad records read at start: one info
    line, `control.ready`, with the counts; no cancel at info; 20 warnings, the other bad
    records at debug; after the start each bad record is a warning again."""
    records, _, _ = _records()
    old = NOW - 2 * WEEK
    with capture_logs() as logs:
        for i in range(1000):
            at = old if i < 10 else NOW
            records.take(Record(b"c", dump(CancelControl(request_id=f"c-{i}", at=at)), offset=i))
        for i in range(30):
            records.take(Record(b"bad", b"not json", offset=1000 + i))
        records.started()
        records.take(Record(b"bad", b"not json", offset=2000))
    info = [e for e in logs if e["log_level"] == "info"]
    assert [e["event"] for e in info] == ["control.ready"]
    [ready] = info
    assert (ready["applied"], ready["expired"], ready["skipped"]) == (990, 10, 30)
    assert ready["cancels"] == 990
    assert ready["skipped_by_reason"] == {"not_json": 30}
    cancels = [e for e in logs if e["event"] == "control.cancel"]
    assert len(cancels) == 1000
    assert {e["log_level"] for e in cancels} == {"debug"}
    warned = [e["offset"] for e in logs if e["log_level"] == "warning"]
    assert warned == [*range(1000, 1000 + MAX_SKIP_WARNINGS_AT_START), 2000]
