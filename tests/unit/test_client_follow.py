"""Following a request: duplicates dropped by result_id, chunks reassembled, a clear end."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from service.client import FollowTimeoutError, _Follow
from service.contracts import EventType, PageResult, ProgressEvent, dump, utc_now
from service.messaging.chunks import split
from service.settings import Settings

SETTINGS = Settings(results_topic="res", progress_topic="prog")


@dataclass
class Record:
    topic: str
    value: bytes
    key: bytes = b"r"
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def result(url: str, run: str) -> PageResult:
    return PageResult(
        request_id="r",
        result_id=f"id-{url}",
        run_id=run,
        url=url,
        ok=True,
        elapsed_ms=1,
        fetched_at=utc_now(),
        worker="w",
    )


def event(kind: EventType, run: str, seq: int, total: int = 2) -> ProgressEvent:
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
    )


def test_duplicates_from_a_redelivery_are_dropped():
    """A second run's results with known result_ids are not yielded again."""
    follow = _Follow(SETTINGS, "r")
    records = [
        Record("res", dump(result("a", "run1"))),
        Record("res", dump(result("a", "run2"))),
        Record("res", dump(result("b", "run2"))),
        Record("res", dump(result("b", "run1"))),
        Record("res", dump(result("x", "run1")), key=b"other"),
    ]
    yielded = [follow.accept(r) for r in records]
    assert [m.run_id if m else None for m in yielded] == ["run1", None, "run2", None, None]


def test_follow_ends_after_the_terminal_event_once_every_result_arrived():
    """`completed` ends the follow only when every URL's result is in."""
    follow = _Follow(SETTINGS, "r")
    follow.accept(Record("prog", dump(event(EventType.ACCEPTED, "run1", 0))))
    follow.accept(Record("res", dump(result("a", "run1"))))
    follow.accept(Record("prog", dump(event(EventType.COMPLETED, "run1", 3))))
    assert not follow.done()
    follow.accept(Record("res", dump(result("b", "run1"))))
    assert follow.done()


def test_chunked_results_are_reassembled():
    """A result split into chunks is yielded once, whole, on its last chunk."""
    follow = _Follow(SETTINGS, "r")
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
    """No terminal event before the deadline: `FollowTimeoutError` names the request."""
    follow = _Follow(SETTINGS, "r")
    with pytest.raises(FollowTimeoutError, match="request r did not end"):
        async for _ in follow.messages(_SilentConsumer(), timeout_s=0):
            pass
