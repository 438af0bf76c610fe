"""The page cache against the real broker, worker, egress proxy and Chromium, default
settings: a second request within `max_age_ms` never reaches the site; stale entries are
revalidated with one conditional request; identity-bearing requests and `no-store` or
`private` answers stay out of it; `cache_only` never contacts the site; a fetcher that
takes over a dead one's partitions answers from the entries it left."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

import aiohttp
import pytest
from _cachepages import page_words
from harness import produce

from service.contracts import CrawlOptions, CrawlRequest, ErrorCode, EventType, dump

pytestmark = pytest.mark.integration

DEADLINE_S = 240.0
"""Generous: two shared cores, one worker, up to 40 browser pages per request."""

HOUR_MS = 3_600_000


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


async def _crawl(topics, collector, request_id: str, urls: list[str], **options: object):
    """The request's results by URL, once it completed."""
    await produce(topics, [_request(request_id, urls, **options)])
    await collector.wait_until(lambda seen: seen.terminal(request_id), deadline_s=DEADLINE_S)
    [terminal] = collector.seen.terminal(request_id)
    assert terminal.type == EventType.COMPLETED, terminal
    results = {result.url: result for result in collector.seen.results_of(request_id)}
    assert set(results) == set(urls)
    return results


def _paths(site, kind: str, count: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [site.url(f"/cache/{kind}/{tag}-{i}") for i in range(count)]


def _answers(site, url: str, status: int) -> int:
    path = url.removeprefix(site.base_url)
    return site.cache_answers[f"{path} {status}"]


async def test_a_second_request_within_max_age_never_reaches_the_site(
    shared_topics, shared_collector, site, shared_worker
):
    """Two requests for the same 40 pages, the second with `max_age_ms` of an hour: the site
    answers each page once; every second result is a `hit` carrying the first fetch's
    `cached_at` and the same content. `no-store` and `private` pages are fetched again."""
    pages = _paths(site, "plain", 38)
    unshared = [*_paths(site, "nostore", 1), *_paths(site, "private", 1)]
    urls = pages + unshared
    first = await _crawl(shared_topics, shared_collector, f"c1-{uuid.uuid4().hex}", urls)
    second = await _crawl(
        shared_topics, shared_collector, f"c2-{uuid.uuid4().hex}", urls, max_age_ms=HOUR_MS
    )
    for url in pages:
        assert first[url].ok, first[url].error
        assert first[url].cache_state == "miss"
        assert first[url].cached_at is not None
        assert second[url].cache_state == "hit", (url, second[url].cache_state)
        assert second[url].cached_at == first[url].cached_at
        assert second[url].markdown == first[url].markdown
        assert page_words(url.removeprefix(site.base_url), 0) in (second[url].markdown or "")
        assert _answers(site, url, 200) == 1, url
    for url in unshared:
        assert first[url].cached_at is None
        assert second[url].cache_state == "miss"
        assert _answers(site, url, 200) == 2, url


async def test_stale_entries_are_revalidated_and_a_changed_page_comes_back_new(
    shared_topics, shared_collector, site, shared_worker
):
    """Entries older than `max_age_ms`: pages with an `ETag` or a `Last-Modified` get one
    conditional request each and come back `revalidated` without a full fetch; pages
    without validators are fetched again; a page whose `ETag` changed comes back with its
    new words."""
    etag, lastmod, plain = (_paths(site, kind, 3) for kind in ("etag", "lastmod", "plain"))
    changed = etag[0]
    urls = etag + lastmod + plain
    first = await _crawl(shared_topics, shared_collector, f"s1-{uuid.uuid4().hex}", urls)
    async with aiohttp.ClientSession() as session:
        path = changed.removeprefix(site.base_url).removeprefix("/cache/")
        async with session.post(site.url(f"/cache/change/{path}")) as answer:
            assert answer.status == 200
    second = await _crawl(
        shared_topics, shared_collector, f"s2-{uuid.uuid4().hex}", urls, max_age_ms=1
    )
    for url in [*etag[1:], *lastmod]:
        assert second[url].cache_state == "revalidated", (url, second[url].cache_state)
        assert second[url].cached_at == first[url].cached_at
        assert second[url].markdown == first[url].markdown
        assert _answers(site, url, 200) == 1, url
        assert _answers(site, url, 304) == 1, url
    for url in plain:
        assert second[url].cache_state == "miss"
        assert _answers(site, url, 200) == 2, url
    path = changed.removeprefix(site.base_url)
    assert second[changed].cache_state == "miss"
    assert page_words(path, 1) in (second[changed].markdown or "")
    assert page_words(path, 0) not in (second[changed].markdown or "")


async def test_requests_with_identity_never_use_the_shared_cache(
    shared_topics, shared_collector, site, shared_worker
):
    """A request with `headers` or `cookies` is neither answered from nor stored in the
    shared cache, even for a page another request stored; `cache_only` then ends the page
    `cache_miss` without touching the site."""
    [url] = _paths(site, "plain", 1)
    await _crawl(shared_topics, shared_collector, f"i0-{uuid.uuid4().hex}", [url])
    cookie = {"name": "session", "value": "s3cret", "url": url}
    identities = ({"headers": {"X-Api-Key": "k1"}}, {"cookies": [cookie]})
    for identity in identities:
        results = await _crawl(
            shared_topics,
            shared_collector,
            f"i-{uuid.uuid4().hex}",
            [url],
            max_age_ms=HOUR_MS,
            **identity,
        )
        assert results[url].cache_state == "bypass"
    assert _answers(site, url, 200) == 1 + len(identities)
    only = await _crawl(
        shared_topics,
        shared_collector,
        f"i-{uuid.uuid4().hex}",
        [url],
        cache_only=True,
        headers={"X-Api-Key": "k1"},
    )
    assert only[url].error is not None
    assert only[url].error.code == ErrorCode.CACHE_MISS
    assert _answers(site, url, 200) == 1 + len(identities)


async def test_cache_only_on_a_page_never_fetched_is_a_cache_miss_without_a_request(
    shared_topics, shared_collector, site, shared_worker
):
    """`cache_only` for pages nobody fetched: each ends `cache_miss`; the site sees nothing."""
    urls = _paths(site, "plain", 3)
    results = await _crawl(
        shared_topics, shared_collector, f"o-{uuid.uuid4().hex}", urls, cache_only=True
    )
    for url in urls:
        assert not results[url].ok
        assert results[url].error is not None
        assert results[url].error.code == ErrorCode.CACHE_MISS
        assert site.hits[url.removeprefix(site.base_url)] == 0


@pytest.mark.long_running
async def test_the_fetcher_that_takes_over_a_dead_ones_partitions_serves_its_hits(
    topics, collector, site, start_worker
):
    """kill -9 of the worker that fetched and stored 12 pages: the worker that takes its
    partitions over answers them from its entries (no page is fetched again)."""
    urls = _paths(site, "plain", 12)
    first = await start_worker("c-first")
    # With `max_age_ms` too: were the request delivered again after the kill (its offset
    # not yet committed), its second run answers from the entries as well.
    await _crawl(topics, collector, f"k1-{uuid.uuid4().hex}", urls, max_age_ms=HOUR_MS)
    await first.kill()
    await start_worker("c-second")
    second = await _crawl(topics, collector, f"k2-{uuid.uuid4().hex}", urls, max_age_ms=HOUR_MS)
    for url in urls:
        assert second[url].cache_state == "hit", (url, second[url].cache_state)
        assert _answers(site, url, 200) == 1, url


async def test_a_purged_url_is_fetched_again_and_its_neighbours_still_hit(
    shared_topics, shared_collector, site, shared_worker
):
    """`crawlstream cache purge --url`: the purged page's next request fetches it; a page of
    the same host that was not named still answers from its entry."""
    purged, kept = _paths(site, "plain", 2)
    await _crawl(shared_topics, shared_collector, f"p1-{uuid.uuid4().hex}", [purged, kept])
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        "cache",
        "purge",
        "--url",
        purged,
        env=os.environ | shared_topics.env(),
        stdout=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(DEADLINE_S):
        out, _ = await process.communicate()
    assert process.returncode == 0
    assert out.decode().strip() == "1 cache entries purged"
    again = await _crawl(
        shared_topics,
        shared_collector,
        f"p2-{uuid.uuid4().hex}",
        [purged, kept],
        max_age_ms=HOUR_MS,
    )
    assert again[purged].cache_state == "miss"
    assert again[kept].cache_state == "hit"
    assert _answers(site, purged, 200) == 2
    assert _answers(site, kept, 200) == 1


async def test_a_deep_recrawl_within_max_age_fetches_nothing_and_finds_the_same_pages(
    shared_topics, shared_collector, site, shared_worker
):
    """A deep crawl, then the same crawl with `max_age_ms`: the second fetches nothing from
    the site, every page is a `hit`, and its links (read from the entries) admit exactly
    the pages of the first."""
    [seed] = _paths(site, "plain", 1)
    spec = {"max_pages": 4, "max_depth": 3}

    async def deep(request_id: str, **options: object) -> dict[str, object]:
        request = CrawlRequest(
            request_id=request_id, urls=[seed], options=CrawlOptions(**options), crawl=spec
        )
        await produce(shared_topics, [(request_id.encode(), dump(request))])
        await shared_collector.wait_until(
            lambda seen: seen.terminal(request_id), deadline_s=DEADLINE_S
        )
        [terminal] = shared_collector.seen.terminal(request_id)
        assert terminal.type == EventType.COMPLETED, terminal
        return {r.url: r for r in shared_collector.seen.results_of(request_id)}

    first = await deep(f"d1-{uuid.uuid4().hex}")
    answered = sum(site.cache_answers.values())
    second = await deep(f"d2-{uuid.uuid4().hex}", max_age_ms=HOUR_MS)
    assert len(first) == spec["max_pages"]
    assert set(second) == set(first)
    assert {r.cache_state for r in second.values()} == {"hit"}
    assert sum(site.cache_answers.values()) == answered
