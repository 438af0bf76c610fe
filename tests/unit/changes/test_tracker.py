"""`ChangeTracker` over the in-memory history: statuses, diffs, tags and the feed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaConnectionError

from service.changes import ChangeTracker, TrackedPage
from service.changes._memory import MemoryHistoryStore
from service.content.page import PageContent, failed
from service.contracts import ChangeTracking, CrawlOptions, ErrorCode, PageTask, RecordSource
from service.contracts_changes import ChangeRecord
from service.metrics import Metrics

if TYPE_CHECKING:
    from service.messaging.publisher import Message

URL = "http://site.test/a"


def _html(words: str) -> str:
    clock = f"<time>{len(words)}:00</time>"
    return f"<html><body><main><h1>Title</h1><p>{words}</p>{clock}</main></body></html>"


def _content(words: str) -> PageContent:
    return PageContent(ok=True, final_url=URL, status_code=200, source_html=_html(words))


def _task(tag: str | None = None, *, diff: bool = True, request_id: str = "r") -> TrackedPage:
    options = CrawlOptions(change_tracking=ChangeTracking(tag=tag, diff=diff))
    task = PageTask(
        request_id=request_id,
        run_id="run-1",
        url=URL,
        options=options,
        source=RecordSource(topic="t", partition=0, offset=0),
    )
    return TrackedPage(task=task, partition=2)


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


class _Feed:
    def __init__(self) -> None:
        self.records: list[ChangeRecord] = []

    async def __call__(self, message: Message) -> None:
        assert message.key == URL.encode()
        self.records.append(ChangeRecord.model_validate_json(message.value))


def _tracker(store: MemoryHistoryStore | None = None) -> tuple[ChangeTracker, _Feed]:
    feed = _Feed()
    tracker = ChangeTracker(
        store or MemoryHistoryStore(), feed, Metrics(), changes_topic="c", clock=_Clock()
    )
    return tracker, feed


async def test_new_then_same_then_changed_with_a_diff_and_the_feed_holds_only_changes():
    tracker, feed = _tracker()
    first = await tracker.track(_task(request_id="r1"), _content("Tea costs 3 EUR."))
    same = await tracker.track(_task(request_id="r2"), _content("Tea costs 3 EUR."))
    changed = await tracker.track(_task(request_id="r3"), _content("Tea costs 4 EUR."))
    assert first.change_tracking is not None
    assert first.change_tracking.status == "new"
    assert first.change_tracking.previous_fetched_at is None
    assert same.change_tracking is not None
    assert same.change_tracking.status == "same"
    assert same.change_tracking.previous_fetched_at is not None
    assert changed.change_tracking is not None
    assert changed.change_tracking.status == "changed"
    diff = (changed.change_tracking.diff or "").splitlines()
    assert "-Tea costs 3 EUR." in diff
    assert "+Tea costs 4 EUR." in diff
    assert [record.status for record in feed.records] == ["new", "changed"]
    assert feed.records[1].previous_sha256 == feed.records[0].content_sha256
    assert feed.records[1].diff_bytes == len(changed.change_tracking.diff or "")


async def test_a_page_now_404_is_removed_once_and_a_tag_keeps_its_own_history():
    tracker, feed = _tracker()
    await tracker.track(_task(request_id="r1"), _content("Tea"))
    gone = failed(ErrorCode.HTTP_ERROR, "HTTP 404", status_code=404)
    removed = await tracker.track(_task(request_id="r2"), gone)
    still = await tracker.track(_task(request_id="r3"), gone)
    other_tag = await tracker.track(_task("weekly", request_id="r4"), _content("Tea"))
    assert removed.change_tracking is not None
    assert removed.change_tracking.status == "removed"
    assert still.change_tracking is not None
    assert still.change_tracking.status == "same"
    assert other_tag.change_tracking is not None
    assert other_tag.change_tracking.status == "new"
    assert [record.status for record in feed.records] == ["new", "removed", "new"]


async def test_a_failed_page_is_not_compared_and_a_broken_history_never_fails_a_page():
    tracker, _ = _tracker()
    timeout = failed(ErrorCode.TIMEOUT, "slow")
    assert (await tracker.track(_task(), timeout)).change_tracking is None

    class _Broken(MemoryHistoryStore):
        async def find(self, partition: int, key: str) -> None:  # noqa: ARG002
            raise KafkaConnectionError

    broken, _ = _tracker(_Broken())
    content = await broken.track(_task(), _content("Tea"))
    assert content.ok
    assert content.change_tracking is None


async def test_without_diff_a_changed_page_has_no_diff():
    tracker, _ = _tracker()
    await tracker.track(_task(diff=False, request_id="r1"), _content("Tea costs 3 EUR."))
    changed = await tracker.track(_task(diff=False, request_id="r2"), _content("Tea costs 4 EUR."))
    assert changed.change_tracking is not None
    assert changed.change_tracking.status == "changed"
    assert changed.change_tracking.diff is None


async def test_a_redelivered_page_compares_with_what_its_first_attempt_compared_with():
    """The second attempt of one result (its worker died after tracking it) reports the
    change since the previous run, with the same diff, not `same`."""
    tracker, feed = _tracker()
    await tracker.track(_task(request_id="r1"), _content("Tea costs 3 EUR."))
    first_try = await tracker.track(_task(request_id="r2"), _content("Tea costs 4 EUR."))
    again = await tracker.track(_task(request_id="r2"), _content("Tea costs 4 EUR."))
    assert first_try.change_tracking is not None
    assert again.change_tracking is not None
    assert again.change_tracking.status == "changed"
    assert again.change_tracking.diff == first_try.change_tracking.diff
    assert (
        again.change_tracking.previous_fetched_at == first_try.change_tracking.previous_fetched_at
    )
    new_run = await tracker.track(_task(request_id="r3"), _content("Tea costs 4 EUR."))
    assert new_run.change_tracking is not None
    assert new_run.change_tracking.status == "same"
    assert [record.status for record in feed.records] == ["new", "changed", "changed"]
