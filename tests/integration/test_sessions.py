"""Isolation between requests: a context of its own by default (spare contexts included), one
shared context for requests that name the same `session`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from harness import produce

from service.browser.pool import BrowserPool
from service.contracts import CrawlOptions, CrawlRequest, EventType, dump
from service.settings import Settings

if TYPE_CHECKING:
    from harness import Collector
    from testsite import TestSite

    from service.browser.context import RequestContext

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0


async def _crawl(topics, collector: Collector, request_id: str, url: str, **options: object) -> str:
    """Crawl one URL as its own request; the page's title."""
    request = CrawlRequest(request_id=request_id, urls=[url], options=CrawlOptions(**options))
    await produce(topics, [(request_id.encode(), dump(request))])
    await collector.wait_until(lambda seen: seen.terminal(request_id), deadline_s=DEADLINE_S)
    [terminal] = collector.seen.terminal(request_id)
    assert terminal.type is EventType.COMPLETED
    [result] = collector.seen.results_of(request_id)
    assert result.ok, result.error
    return result.title or ""


async def test_requests_of_one_session_share_cookies_and_other_requests_do_not(
    topics, collector, site: TestSite, start_worker
):
    """A cookie set by a request of session `s1` is sent by the next request of `s1`, not by a
    request without a session, nor one of session `s2`; without sessions, a cookie one request
    set is never sent by the next (each gets a fresh context, spares included)."""
    await start_worker()
    show = site.url("/cookie/show")
    assert await _crawl(topics, collector, "s1-set", site.url("/cookie/set?v=alpha"), session="s1")
    assert await _crawl(topics, collector, "s1-show", show, session="s1") == "cookie: alpha"
    assert await _crawl(topics, collector, "none-show", show) == "cookie: none"
    assert await _crawl(topics, collector, "s2-show", show, session="s2") == "cookie: none"
    assert await _crawl(topics, collector, "own-set", site.url("/cookie/set?v=beta"))
    assert await _crawl(topics, collector, "own-show", show) == "cookie: none"
    assert await _crawl(topics, collector, "s1-again", show, session="s1") == "cookie: alpha"


async def test_a_spare_context_goes_to_one_request_and_never_comes_back(site: TestSite):
    """Without context reuse, contexts opened ahead of need are handed out once: two requests
    open at the same time get different contexts, a context closed by its request is never
    handed out again, and a spare's pages have not navigated."""
    settings = Settings(allowed_hosts=[f"127.0.0.1:{site.port}"], spare_contexts=2, context_reuse=0)
    options = CrawlOptions()
    async with BrowserPool(settings) as pool:
        first = await pool.open_context(options)
        second = await pool.open_context(options)
        assert first.context is not second.context
        assert all(page.url == "about:blank" for page in [*first.idle, *second.idle])
        used = {id(first.context), id(second.context)}
        await first.hand_back()
        for _ in range(4):
            later = await pool.open_context(options)
            assert id(later.context) not in used
            used.add(id(later.context))
            await later.hand_back()
        await second.hand_back()


async def test_one_session_is_one_context_and_blocking_options_keep_theirs_apart(
    site: TestSite,
):
    """Two requests of one session get the same context while they run; a request of that
    session that blocks resource types gets another (blocking applies to a whole context)."""
    settings = Settings(allowed_hosts=[f"127.0.0.1:{site.port}"])
    async with BrowserPool(settings) as pool:
        first = await pool.open_context(CrawlOptions(session="s"))
        second = await pool.open_context(CrawlOptions(session="s"))
        blocking = await pool.open_context(CrawlOptions(session="s", block_resources=["image"]))
        assert first is second
        assert blocking is not first
        for context in (first, second, blocking):
            await context.hand_back()


async def test_a_wiped_context_serves_one_request_at_a_time_and_shows_nothing_of_the_last(
    site: TestSite,
):
    """With the default reuse, a context closed by its request comes back to a later request
    (never to two at once, never to one that blocks other resource types), wiped: its pages
    are at about:blank with a one-entry history and an empty window name, and the last
    request's cookie is gone; it is closed for good after `context_reuse` requests."""
    settings = Settings(allowed_hosts=[f"127.0.0.1:{site.port}"], context_reuse=3)
    sources: list[str] = []
    async with BrowserPool(settings, on_context=sources.append) as pool:
        first = await pool.open_context(CrawlOptions())
        async with first.page() as page:
            await page.goto(site.url("/cookie/set?v=alpha"))
            await page.evaluate(
                "() => { window.name = 'left behind'; history.pushState({}, '', '?x'); }"
            )
        other = await pool.open_context(CrawlOptions())
        assert other.context is not first.context
        await first.hand_back()
        blocking = await _reopen(pool, CrawlOptions(block_resources=["image"]))
        assert blocking.context is not first.context
        again = await _reopen(pool, CrawlOptions())
        assert again is first
        assert sources[-1] == "wiped"
        assert all(page.url == "about:blank" for page in again.idle)
        async with again.page() as page:
            assert await page.evaluate("() => [history.length, window.name]") == [1, ""]
            await page.goto(site.url("/cookie/show"))
            assert await page.title() == "cookie: none"
        await again.hand_back()
        third = await _reopen(pool, CrawlOptions())
        assert third is first
        await third.hand_back()
        fourth = await _reopen(pool, CrawlOptions())
        assert fourth is not first  # served 3 requests: closed, not wiped
        for context in (other, blocking, fourth):
            await context.hand_back()


async def _reopen(pool: BrowserPool, options: CrawlOptions) -> RequestContext:
    """A context for `options` once the background wipe of a just-closed one had its chance:
    the first context opened after the pool has no wipe in progress."""
    async with asyncio.timeout(DEADLINE_S):
        while pool.wiping:
            await asyncio.sleep(0.02)
    return await pool.open_context(options)
