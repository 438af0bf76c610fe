"""The page cache as a fetcher uses it: answer a page task from its entry, or fetch and keep.

`PageCache.content` wraps a page's fetch: an eligible task whose entry is fresh enough is
answered from the stored document (its outputs derived for this request), a stale entry
with validators is revalidated with one conditional request, and anything else is fetched
as usual and stored when the answer allows it. Any failure of the cache itself (the broker
slow, a record unreadable) is logged and counted, and the page is fetched: the cache never
fails a page.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from aiokafka.errors import KafkaError

from service.background import Background
from service.cache.freshness import Validators, Worth, storable, worth
from service.cache.records import CacheIndexRecord, StoredPage
from service.cache.variant import bypass_reason, cache_key
from service.content.page import failed, page_content
from service.contracts import ErrorCode, Format, utc_now
from service.errors import BrokerUnavailableError
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from datetime import datetime

    from service.cache.store import CacheStore, PackedPage
    from service.content.extract import FollowRules
    from service.content.page import PageContent
    from service.contracts import PageTask
    from service.metrics import Metrics

log = get_logger(__name__)

NOT_MODIFIED: Final = 304

CACHE_ERRORS: Final = (KafkaError, TimeoutError, BrokerUnavailableError, OSError)
"""What the cache's broker may raise; the page is then fetched as if there were no cache."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedPage:
    """One task as the cache sees it."""

    task: PageTask
    partition: int | None
    """The page partition its host is placed on (where its entry lives); None: unknown."""
    follow: FollowRules | None
    max_bytes: int


class PageCache:
    """A fetcher's page cache over a `CacheStore`."""

    def __init__(
        self,
        store: CacheStore,
        metrics: Metrics,
        *,
        scope: Callable[[PageTask], str] = lambda _task: "",
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._scope = scope
        """The scope a task's entries are kept under (a tenant's, or one shared by all)."""
        self._clock = clock
        self._writes = Background()
        """Entries being written: a page's result does not wait for them, its record does."""
        self._writing: dict[tuple[str, str, str], set[asyncio.Task[None]]] = {}

    async def content(
        self,
        page: CachedPage,
        fetch: Callable[[], Awaitable[PageContent]],
        revalidate: Callable[[Validators], Awaitable[int | None]],
    ) -> PageContent:
        """The page's content: from the cache when it may and can answer, else `fetch`ed.
        `revalidate` sends the conditional request and returns the answer's status."""
        task = page.task
        options = task.options
        bypass = bypass_reason(task.url, options)
        if page.partition is None and bypass is None:
            bypass = "its host's page partition is not known here"
        if bypass is not None:
            if options.cache_only:
                return self._cache_miss(f"{task.url} cannot use the shared cache ({bypass})")
            self._metrics.cache_lookups.labels("bypass").inc()
            return (await fetch()).replaced(cache_state="bypass")
        key = cache_key(task.url, options, scope=self._scope(task))
        if options.max_age_ms > 0 or options.cache_only:
            entry = await self._find(_partition(page), key)
            if entry is not None and _derivable(entry, options.formats):
                answered = await self._from_entry(page, entry, revalidate)
                if answered is not None:
                    return answered
        if options.cache_only:
            return self._cache_miss(f"no usable cache entry for {task.url}")
        self._metrics.cache_lookups.labels("miss").inc()
        content = await fetch()
        return await self._keep(page, key, content)

    def _cache_miss(self, why: str) -> PageContent:
        self._metrics.cache_lookups.labels("cache_miss").inc()
        return failed(ErrorCode.CACHE_MISS, f"cache only: {why}")

    async def _find(self, partition: int, key: str) -> CacheIndexRecord | None:
        try:
            return await self._store.find(partition, key)
        except CACHE_ERRORS as exc:
            log.warning("cache.lookup_failed", error=repr(exc))
            return None

    async def _from_entry(
        self,
        page: CachedPage,
        entry: CacheIndexRecord,
        revalidate: Callable[[Validators], Awaitable[int | None]],
    ) -> PageContent | None:
        """The answer an entry gives this task, or None when it gives none."""
        options = page.task.options
        validated_s = entry.validated_at.timestamp()
        validators = Validators(etag=entry.etag, last_modified=entry.last_modified)
        judged = worth(
            validated_at_s=validated_s,
            now_s=self._clock().timestamp(),
            max_age_ms=options.max_age_ms,
            validators=validators,
        )
        if judged is Worth.FRESH or (options.cache_only and options.max_age_ms == 0):
            return await self._answer(page, entry, "hit")
        if judged is Worth.STALE or options.cache_only:
            return None
        status = await revalidate(validators)
        if status != NOT_MODIFIED:
            return None
        refreshed = entry.model_copy(update={"validated_at": self._clock()})
        try:
            await self._store.refresh(_partition(page), refreshed)
        except CACHE_ERRORS as exc:
            log.warning("cache.refresh_failed", error=repr(exc))
        return await self._answer(page, refreshed, "revalidated")

    async def _answer(
        self, page: CachedPage, entry: CacheIndexRecord, state: str
    ) -> PageContent | None:
        """The task's content derived from the entry's stored page (None: the body is gone)."""
        try:
            stored = await self._store.body(_partition(page), entry)
        except CACHE_ERRORS as exc:
            log.warning("cache.body_failed", error=repr(exc))
            return None
        if stored is None:
            return None
        options = page.task.options
        shot = stored.screenshot if Format.SCREENSHOT in options.formats else None
        content = await page_content(
            status=stored.status_code,
            final_url=stored.final_url,
            html=stored.html,
            options=options,
            max_bytes=page.max_bytes,
            screenshot=shot,
            follow=page.follow,
        )
        self._metrics.cache_lookups.labels(state).inc()
        self._metrics.cache_bytes_saved.inc(len(stored.html))
        return content.replaced(
            rendered_by=stored.rendered_by,
            cache_state="hit" if state == "hit" else "revalidated",
            cached_at=entry.fetched_at,
        )

    async def _keep(self, page: CachedPage, key: str, content: PageContent) -> PageContent:
        """Store what was fetched when the request and the answer allow it."""
        task = page.task
        if not task.options.store_in_cache:
            return content.replaced(cache_state="miss")
        if not _storable(content):
            self._metrics.cache_stores.labels("not_storable").inc()
            return content.replaced(cache_state="miss")
        now = self._clock()
        html = content.source_html or ""
        stored = StoredPage(
            key=key,
            url=task.url,
            final_url=content.final_url or task.url,
            status_code=content.status_code or 200,
            html=html,
            screenshot=content.screenshot,
            rendered_by=content.rendered_by,
            fetched_at=now,
        )
        validators = Validators.of(content.cache_headers)
        entry = CacheIndexRecord(
            key=key,
            url=task.url,
            fetched_at=now,
            validated_at=now,
            body_offset=0,
            etag=validators.etag,
            last_modified=validators.last_modified,
            content_sha256=hashlib.sha256(html.encode()).hexdigest(),
            has_screenshot=content.screenshot is not None,
        )
        packed = self._store.pack(stored)
        if packed is None:
            self._metrics.cache_stores.labels("too_large").inc()
            return content.replaced(cache_state="miss")
        writing = self._writes.start(self._put(_partition(page), packed, entry))
        self._writing.setdefault(_identity(task), set()).add(writing)
        writing.add_done_callback(lambda done: self._written(task, done))
        return content.replaced(cache_state="miss", cached_at=now)

    async def stored(self, task: PageTask) -> None:
        """Wait until what `content` handed to the store for `task` is written (a failed
        write is logged and counted, not raised). The fetcher writes a page's record after
        this: a request's terminal event comes after its pages are in the cache."""
        writing = self._writing.get(_identity(task))
        if writing:
            await asyncio.wait(set(writing))

    async def close(self) -> None:
        """Stop the writes still running (their pages' records were not written)."""
        await self._writes.cancel()

    async def _put(self, partition: int, packed: PackedPage, entry: CacheIndexRecord) -> None:
        try:
            kept = await self._store.put(partition, packed, entry)
        except CACHE_ERRORS as exc:
            log.warning("cache.store_failed", error=repr(exc))
            self._metrics.cache_stores.labels("failed").inc()
            return
        self._metrics.cache_stores.labels("stored" if kept else "failed").inc()

    def _written(self, task: PageTask, done: asyncio.Task[None]) -> None:
        identity = _identity(task)
        writing = self._writing.get(identity, set())
        writing.discard(done)
        if not writing:
            self._writing.pop(identity, None)


def _identity(task: PageTask) -> tuple[str, str, str]:
    """A page of a run: what `stored` finds its writes by."""
    return (task.request_id, task.run_id, task.url)


def _partition(page: CachedPage) -> int:
    if page.partition is None:
        raise ValueError("a page of unknown partition has no cache entry")
    return page.partition


def _derivable(entry: CacheIndexRecord, formats: tuple[Format, ...]) -> bool:
    """Whether the entry can give every format asked (a screenshot only if one was taken;
    a print to PDF never is stored)."""
    if Format.PDF in formats:
        return False
    return Format.SCREENSHOT not in formats or entry.has_screenshot


def _storable(content: PageContent) -> bool:
    return (
        content.ok
        and content.source_html is not None
        and content.document is None
        and not content.truncated
        and storable(content.status_code, content.cache_headers)
    )
