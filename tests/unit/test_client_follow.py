"""Following a submission: only its record's messages, duplicates dropped by result_id, chunks
reassembled, a clear end."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from service.client import FollowTimeoutError, Submission, _Follow
from service.contracts import EventType, PageResult, ProgressEvent, RecordSource, dump, utc_now
from service.messaging.chunks import split
from service.settings import Settings

SETTINGS = Settings(results_topic="res", progress_topic="prog")

FIRST = RecordSource(topic="req", partition=3, offset=7)
SECOND = RecordSource(topic="req", partition=3, offset=8)
"""Two request records with one request_id ("r")."""


@dataclass
class Record:
    topic: str
    value: bytes
    key: bytes = b"r"
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def result(url: str, run: str, source: RecordSource = FIRST) -> PageResult:
    return PageResult(
        request_id="r",
        result_id=f"id-{url}",
        run_id=run,
        url=url,
        ok=True,
        elapsed_ms=1,
        fetched_at=utc_now(),
        worker="w",
        source=source,
    )


def event(
    kind: EventType, run: str, seq: int, total: int = 2, source: RecordSource = FIRST
) -> ProgressEvent:
    return ProgressEvent(
        request_id="r",
        run_id=run,
        seq=seq,
        type=kind,
        total=total,
        succeeded=0,
        failed=0,
        at=utc_now(),
        worker="w",
        source=source,
    )


def submission(source: RecordSource = FIRST) -> Submission:
    return Submission(request_id="r", source=source)


def test_duplicates_from_a_redelivery_are_dropped():
    """A second run of the same record repeats its result_ids: they are not yielded again."""
    follow = _Follow(SETTINGS, submission())
    records = [
        Record("res", dump(result("a", "run1"))),
        Record("res", dump(result("a", "run2"))),
        Record("res", dump(result("b", "run2"))),
        Record("res", dump(result("b", "run1"))),
        Record("res", dump(result("x", "run1")), key=b"other"),
    ]
    yielded = [follow.accept(r) for r in records]
    assert [m.run_id if m else None for m in yielded] == ["run1", None, "run2", None, None]


def test_two_submissions_with_one_request_id_are_kept_apart():
    """Following one of two records with one request_id yields that record's results and
    events only (the other's equal result_ids take nothing away) and ends on its own end."""
    follow = _Follow(SETTINGS, submission(SECOND))
    records = [
        Record("prog", dump(event(EventType.ACCEPTED, "run1", 0, source=FIRST))),
        Record("prog", dump(event(EventType.ACCEPTED, "run2", 0, source=SECOND))),
        Record("res", dump(result("a", "run1", source=FIRST))),
        Record("res", dump(result("b", "run1", source=FIRST))),
        Record("prog", dump(event(EventType.COMPLETED, "run1", 3, source=FIRST))),
        Record("res", dump(result("a", "run2", source=SECOND))),
        Record("res", dump(result("b", "run2", source=SECOND))),
    ]
    yielded = [m for m in (follow.accept(r) for r in records) if m is not None]
    assert [(type(m).__name__, m.run_id) for m in yielded] == [
        ("ProgressEvent", "run2"),
        ("PageResult", "run2"),
        ("PageResult", "run2"),
    ]
    assert not follow.done()
    follow.accept(Record("prog", dump(event(EventType.COMPLETED, "run2", 3, source=SECOND))))
    assert follow.done()


def test_a_bare_request_id_follows_every_submission_each_on_its_own():
    """With a bare request_id, both records' results are yielded (each deduplicated within
    its own record) and the follow ends only when both records have ended."""
    follow = _Follow(SETTINGS, "r")
    records = [
        Record("res", dump(result("a", "run1", source=FIRST))),
        Record("res", dump(result("a", "run2", source=SECOND))),
        Record("res", dump(result("a", "run3", source=FIRST))),
        Record("prog", dump(event(EventType.COMPLETED, "run1", 2, total=1, source=FIRST))),
    ]
    yielded = [m for m in (follow.accept(r) for r in records) if isinstance(m, PageResult)]
    assert [(m.run_id, m.source) for m in yielded] == [("run1", FIRST), ("run2", SECOND)]
    assert not follow.done()
    follow.accept(Record("prog", dump(event(EventType.COMPLETED, "run2", 2, 1, SECOND))))
    assert follow.done()


def test_follow_ends_after_the_terminal_event_once_every_result_arrived():
    """`completed` ends the follow only when every URL's result is in."""
    follow = _Follow(SETTINGS, submission())
    follow.accept(Record("prog", dump(event(EventType.ACCEPTED, "run1", 0))))
    follow.accept(Record("res", dump(result("a", "run1"))))
    follow.accept(Record("prog", dump(event(EventType.COMPLETED, "run1", 3))))
    assert not follow.done()
    follow.accept(Record("res", dump(result("b", "run1"))))
    assert follow.done()


def test_chunked_results_are_reassembled():
    """A result split into chunks is yielded once, whole, on its last chunk."""
    follow = _Follow(SETTINGS, submission())
    whole = result("big", "run1").model_copy(update={"markdown": "m" * 5000})
    parts = split(dump(whole), chunk_id="c", max_bytes=1000)
    yielded = [follow.accept(Record("res", piece, headers=h)) for piece, h in parts]
    assert yielded[:-1] == [None] * (len(parts) - 1)
    assert yielded[-1] == whole


class _SilentConsumer:
    async def getmany(self, timeout_ms: int) -> dict[object, list[Record]]:
        del timeout_ms
        return {}


async def test_follow_gives_up_with_a_clear_error_at_its_deadline():
    """No terminal event before the deadline: `FollowTimeoutError` names the request and its
    record."""
    follow = _Follow(SETTINGS, submission())
    with pytest.raises(FollowTimeoutError, match=r"request r \(req\[3\]@7\) did not end"):
        async for _ in follow.messages(_SilentConsumer(), timeout_s=0):
            pass
