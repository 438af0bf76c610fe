"""`PageCache` over the in-memory store: what is fetched, stored, answered and revalidated."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaConnectionError

from service.cache import CachedPage, PageCache, Validators
from service.cache._memory import MemoryCacheStore
from service.content.page import PageContent
from service.contracts import CrawlOptions, ErrorCode, Format, PageTask, RecordSource
from service.metrics import Metrics

if TYPE_CHECKING:
    from service.cache.records import CacheIndexRecord
    from service.cache.store import PackedPage

URL = "http://site.test/a"
HTML = "<html><head><title>A</title></head><body><main><p>Alpha words</p></main></body></html>"


def _page(**options: object) -> CachedPage:
    task = PageTask(
        request_id="r",
        run_id="run-1",
        url=URL,
        options=CrawlOptions(**options),  # type: ignore[arg-type]
        source=RecordSource(topic="t", partition=0, offset=0),
    )
    return CachedPage(task=task, partition=3, follow=None, max_bytes=1_000_000)


class _Site:
    """Counts fetches and conditional requests; answers as told."""

    def __init__(self, headers: dict[str, str] | None = None, revalidation: int = 304) -> None:
        self.fetches = 0
        self.asked: list[Validators] = []
        self._headers = headers or {}
        self._revalidation = revalidation

    async def fetch(self) -> PageContent:
        self.fetches += 1
        return PageContent(
            ok=True,
            final_url=URL,
            status_code=200,
            markdown="Alpha words",
            source_html=HTML,
            cache_headers=self._headers,
            rendered_by="browser",
        )

    async def revalidate(self, validators: Validators) -> int | None:
        self.asked.append(validators)
        return self._revalidation


class _Clock:
    """A clock that moves a second each time it is read."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


async def _twice(cache: PageCache, site: _Site, **second: object) -> tuple[PageContent, ...]:
    page = _page()
    first = await cache.content(page, site.fetch, site.revalidate)
    await cache.stored(page.task)
    again = await cache.content(_page(**second), site.fetch, site.revalidate)
    return first, again


async def test_a_fetched_page_is_stored_and_answers_within_max_age():
    metrics = Metrics()
    cache, site = PageCache(MemoryCacheStore(), metrics), _Site()
    first, again = await _twice(cache, site, max_age_ms=60_000, formats=[Format.HTML])
    assert (first.cache_state, again.cache_state) == ("miss", "hit")
    assert site.fetches == 1
    assert again.cached_at == first.cached_at
    assert again.html is not None
    assert "Alpha words" in again.html
    assert again.rendered_by == "browser"
    assert metrics.registry.get_sample_value("crawl_cache_lookups_total", {"outcome": "hit"}) == 1


async def test_max_age_zero_always_fetches_and_stores():
    cache, site = PageCache(MemoryCacheStore(), Metrics()), _Site()
    _, again = await _twice(cache, site)
    assert again.cache_state == "miss"
    assert site.fetches == 2


async def test_a_stale_entry_with_a_validator_answers_after_a_304():
    site = _Site(headers={"etag": '"v1"'})
    cache = PageCache(MemoryCacheStore(), Metrics(), clock=_Clock())
    first, again = await _twice(cache, site, max_age_ms=1)
    assert again.cache_state == "revalidated"
    assert again.cached_at == first.cached_at
    assert site.fetches == 1
    assert site.asked == [Validators(etag='"v1"')]


async def test_a_stale_entry_whose_site_answers_200_is_fetched_again():
    site = _Site(headers={"etag": '"v1"'}, revalidation=200)
    cache = PageCache(MemoryCacheStore(), Metrics(), clock=_Clock())
    _, again = await _twice(cache, site, max_age_ms=1)
    assert again.cache_state == "miss"
    assert site.fetches == 2


async def test_no_store_answers_are_never_kept():
    site = _Site(headers={"cache-control": "no-store"})
    store = MemoryCacheStore()
    first, _ = await _twice(PageCache(store, Metrics()), site, max_age_ms=60_000)
    assert first.cached_at is None
    assert site.fetches == 2
    assert not store.entries


async def test_a_screenshot_never_taken_is_a_miss():
    cache, site = PageCache(MemoryCacheStore(), Metrics()), _Site()
    _, again = await _twice(cache, site, max_age_ms=60_000, formats=[Format.SCREENSHOT])
    assert again.cache_state == "miss"
    assert site.fetches == 2


async def test_cache_only_without_an_entry_never_fetches():
    cache, site = PageCache(MemoryCacheStore(), Metrics()), _Site()
    only = await cache.content(_page(cache_only=True), site.fetch, site.revalidate)
    assert only.error is not None
    assert only.error.code == ErrorCode.CACHE_MISS
    assert (site.fetches, site.asked) == (0, [])


async def test_identity_bypasses_the_cache_both_ways():
    store = MemoryCacheStore()
    cache, site = PageCache(store, Metrics()), _Site()
    answer = await cache.content(
        _page(headers={"X-Key": "k"}, max_age_ms=60_000), site.fetch, site.revalidate
    )
    assert answer.cache_state == "bypass"
    assert not store.entries


class _BrokenStore(MemoryCacheStore):
    async def find(self, partition, key):  # noqa: ARG002
        raise KafkaConnectionError


async def test_a_cache_whose_broker_fails_never_fails_the_page():
    cache, site = PageCache(_BrokenStore(), Metrics()), _Site()
    answer = await cache.content(_page(max_age_ms=60_000), site.fetch, site.revalidate)
    assert answer.ok
    assert answer.cache_state == "miss"


class _HeldStore(MemoryCacheStore):
    """Writes wait until `release` is set; `fail` makes them raise instead."""

    def __init__(self, *, fail: bool = False) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.writing = asyncio.Event()
        self._fail = fail

    async def put(self, partition: int, packed: PackedPage, entry: CacheIndexRecord) -> bool:
        self.writing.set()
        await self.release.wait()
        if self._fail:
            raise KafkaConnectionError
        return await super().put(partition, packed, entry)


def _stores(metrics: Metrics, outcome: str) -> float | None:
    return metrics.registry.get_sample_value("crawl_cache_stores_total", {"outcome": outcome})


async def test_the_result_does_not_wait_for_the_entry_and_the_record_does():
    store, site, metrics = _HeldStore(), _Site(), Metrics()
    cache, page = PageCache(store, metrics), _page()
    async with asyncio.timeout(5):  # the write is held: the content comes back without it
        content = await cache.content(page, site.fetch, site.revalidate)
    assert (content.cache_state, content.cached_at is not None) == ("miss", True)
    await store.writing.wait()
    waiting = asyncio.create_task(cache.stored(page.task))
    await asyncio.sleep(0)
    assert not waiting.done()
    assert not store.entries
    store.release.set()
    await waiting
    assert list(store.entries[3]) != []
    assert _stores(metrics, "stored") == 1


async def test_a_failed_write_is_counted_and_does_not_fail_the_page():
    store, site, metrics = _HeldStore(fail=True), _Site(), Metrics()
    cache, page = PageCache(store, metrics), _page()
    content = await cache.content(page, site.fetch, site.revalidate)
    store.release.set()
    await cache.stored(page.task)
    assert content.ok
    assert not store.entries
    assert _stores(metrics, "failed") == 1


async def test_a_page_too_large_for_a_body_says_it_was_not_cached():
    store, site, metrics = MemoryCacheStore(max_body_chars=10), _Site(), Metrics()
    cache, page = PageCache(store, metrics), _page()
    content = await cache.content(page, site.fetch, site.revalidate)
    await cache.stored(page.task)
    assert content.cached_at is None
    assert not store.entries
    assert _stores(metrics, "too_large") == 1


async def test_closing_stops_the_writes_still_running():
    store, site = _HeldStore(), _Site()
    cache, page = PageCache(store, Metrics()), _page()
    await cache.content(page, site.fetch, site.revalidate)
    await store.writing.wait()
    await cache.close()
    await cache.stored(page.task)  # nothing left to wait for
    store.release.set()
    assert not store.entries
