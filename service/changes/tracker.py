"""Change tracking as a fetcher uses it: compare a page with its history, keep the new
observation, and put every change on the change feed.

`ChangeTracker.track` takes a page's content once it is known (fetched, or answered from the
page cache) and returns it with its `change_tracking`. Any failure of tracking itself (the
broker slow, a record unreadable, a document too complex to read) is logged and counted,
and the page goes out without `change_tracking`: tracking never fails a page.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from aiokafka.errors import KafkaError

from service.cache.variant import tenant_scope
from service.changes.compare import GONE_STATUSES, Observation, compare, status_of
from service.changes.history import HistoryRecord, PriorObservation, history_key
from service.changes.reading import Reading, read_html, read_text, shaping_of
from service.content.extract import HtmlTooComplexError
from service.contracts import dump, result_id_for, utc_now
from service.contracts_changes import ChangeRecord
from service.errors import BrokerUnavailableError
from service.logs import get_logger
from service.messaging.publisher import Message

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from datetime import datetime

    from service.changes.history import HistoryStore
    from service.content.page import PageContent
    from service.contracts import ChangeTracking, PageChange, PageTask
    from service.metrics import Metrics

log = get_logger(__name__)

TRACKING_ERRORS: Final = (
    KafkaError,
    TimeoutError,
    BrokerUnavailableError,
    OSError,
    HtmlTooComplexError,
)
"""What tracking may meet; the page then goes out untracked."""

FROM_ENTRY: Final = frozenset({"hit", "revalidated"})
"""Cache states whose content was fetched when the entry was (`cached_at`), not now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackedPage:
    """One task as change tracking sees it."""

    task: PageTask
    partition: int | None
    """The page partition its host is placed on (where its history lives); None: unknown."""


class ChangeTracker:
    """A fetcher's change tracking over a `HistoryStore`, publishing changes with `publish`
    (a message to send, acknowledged when the returned awaitable is done)."""

    def __init__(
        self,
        store: HistoryStore,
        publish: Callable[[Message], Awaitable[None]],
        metrics: Metrics,
        *,
        changes_topic: str,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._publish = publish
        self._metrics = metrics
        self._topic = changes_topic
        self._clock = clock

    async def track(self, page: TrackedPage, content: PageContent) -> PageContent:
        """`content` with its `change_tracking`, when the request asked and it can compare."""
        tracking = page.task.options.change_tracking
        if tracking is None or page.partition is None:
            return content
        try:
            change = await self._tracked(page, page.partition, tracking, content)
        except TRACKING_ERRORS as exc:
            log.warning("changes.track_failed", url=page.task.url, error=repr(exc)[:300])
            self._metrics.changes.labels("failed").inc()
            return content
        if change is None:
            return content
        self._metrics.changes.labels(change.status).inc()
        return content.replaced(change_tracking=change)

    async def _tracked(
        self, page: TrackedPage, partition: int, tracking: ChangeTracking, content: PageContent
    ) -> PageChange | None:
        task = page.task
        current = await self._observe(task, tracking, content)
        if current is None:
            return None
        scope = tenant_scope(task.request_metadata)
        key = history_key(task.url, task.options, tracking, scope=scope)
        history = await self._store.find(partition, key)
        result_id = result_id_for(task.request_id, task.url)
        previous, again = (None, False) if history is None else history.basis(result_id)
        if previous is None and current.gone:
            return None  # never seen answering: nothing was removed
        status = status_of(previous, current)
        markdown = None
        if tracking.diff and status == "changed":
            markdown = await self._store.markdown(partition, key, before=again)
        change = compare(previous, current, previous_markdown=markdown)
        await self._store.put(partition, _record(task, key, result_id, previous, current, markdown))
        if change.status != "same":
            await self._announce(task, tracking, change, previous, current)
        return change

    async def _observe(
        self, task: PageTask, tracking: ChangeTracking, content: PageContent
    ) -> Observation | None:
        """What the page says now; None when it cannot be compared (a failure other than
        a 404 or 410)."""
        fetched_at = content.cached_at if content.cache_state in FROM_ENTRY else None
        fetched_at = fetched_at or self._clock()
        if not content.ok:
            if content.status_code in GONE_STATUSES:
                return Observation(fetched_at=fetched_at, sha256=None)
            return None
        reading = await self._read(task, tracking, content)
        return Observation(fetched_at=fetched_at, sha256=reading.sha256, markdown=reading.markdown)

    async def _read(
        self, task: PageTask, tracking: ChangeTracking, content: PageContent
    ) -> Reading:
        if content.source_html is None:
            return read_text(content.markdown or content.text or "")
        return await asyncio.to_thread(
            read_html,
            content.source_html,
            base_url=content.final_url or task.url,
            shaping=shaping_of(task.options, tracking.ignore),
        )

    async def _announce(
        self,
        task: PageTask,
        tracking: ChangeTracking,
        change: PageChange,
        previous: Observation | None,
        current: Observation,
    ) -> None:
        """Put the change on the change feed, keyed by the page's URL."""
        record = ChangeRecord.model_validate(
            {
                "url": task.url,
                "status": change.status,
                "tag": tracking.tag,
                "request_id": task.request_id,
                "result_id": result_id_for(task.request_id, task.url),
                "run_id": task.run_id,
                "source": task.source,
                "fetched_at": current.fetched_at,
                "previous_fetched_at": change.previous_fetched_at,
                "content_sha256": current.sha256,
                "previous_sha256": previous.sha256 if previous is not None else None,
                "diff_bytes": len(change.diff.encode()) if change.diff else 0,
            }
        )
        await self._publish(Message(self._topic, task.url.encode(), dump(record)))


def _record(
    task: PageTask,
    key: str,
    result_id: str,
    previous: Observation | None,
    current: Observation,
    previous_markdown: str | None,
) -> HistoryRecord:
    """The page's new history: `current`, and the `previous` it was compared with (its
    Markdown when it was read for a diff, or equal to the current one)."""
    before = None
    if previous is not None:
        same = previous.sha256 == current.sha256
        markdown = current.markdown if same else previous_markdown
        before = PriorObservation(
            fetched_at=previous.fetched_at, sha256=previous.sha256, markdown=markdown
        )
    tracking = task.options.change_tracking
    return HistoryRecord(
        key=key,
        url=task.url,
        tag=None if tracking is None else tracking.tag,
        result_id=result_id,
        fetched_at=current.fetched_at,
        sha256=current.sha256,
        markdown=current.markdown,
        before=before,
    )
