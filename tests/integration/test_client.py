"""The Python client end to end against a real worker."""

from __future__ import annotations

import pytest

from service.client import CrawlClient
from service.contracts import CrawlOptions, EventType, PageResult, ProgressEvent

pytestmark = pytest.mark.integration


async def test_crawl_returns_every_result_and_follow_sees_the_whole_run(topics, site, start_worker):
    """`crawl()` returns one result per URL in order; `follow()` replays the run from the
    request's partition: accepted first, completed last, each result once."""
    await start_worker()
    urls = [site.url("/page/11"), site.url("/status/404"), site.url("/page/12")]
    async with CrawlClient(topics.settings()) as client:
        results = await client.crawl(urls, CrawlOptions(formats=["markdown"]), timeout_s=180)
        assert [r.url for r in results] == urls
        assert [r.ok for r in results] == [True, False, True]
        assert "Page 11" in (results[0].markdown or "")

        messages = [m async for m in client.follow(results[0].request_id, timeout_s=60)]
    events = [m for m in messages if isinstance(m, ProgressEvent)]
    pages = [m for m in messages if isinstance(m, PageResult)]
    assert events[0].type == EventType.ACCEPTED
    assert events[-1].type == EventType.COMPLETED
    assert sorted(p.url for p in pages) == sorted(urls)
