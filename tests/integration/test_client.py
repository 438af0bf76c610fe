"""The Python client end to end against a real worker."""

from __future__ import annotations

import pytest
from harness import read_topic

from service.client import CrawlClient
from service.contracts import (
    CrawlOptions,
    EventType,
    PageResult,
    ProgressEvent,
    RecordSource,
)

pytestmark = pytest.mark.integration


async def test_crawl_returns_every_result_and_follow_sees_the_whole_run(
    shared_topics, site, shared_worker
):
    """`crawl()` returns one result per URL in order; `follow()` replays the run from the
    request's partition: accepted first, completed last, each result once."""
    urls = [site.url("/page/11"), site.url("/status/404"), site.url("/page/12")]
    async with CrawlClient(shared_topics.settings()) as client:
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


async def test_two_submissions_with_one_request_id_are_followed_apart(
    shared_topics, site, shared_worker
):
    """Two records with one request_id both run; following each submission yields exactly its
    own results (one per URL, none dropped as the other's duplicate) and its own terminal
    event, and every message names that record as its `source`."""
    urls = [site.url("/page/21"), site.url("/page/22")]
    async with CrawlClient(shared_topics.settings()) as client:
        submissions = [
            await client.submit(urls, request_id="reused", metadata={"submission": n})
            for n in (1, 2)
        ]
        followed = [[m async for m in client.follow(s, timeout_s=180)] for s in submissions]
    records = await read_topic(
        shared_topics.bootstrap, shared_topics.requests, count=2, deadline_s=60, key=b"reused"
    )
    sources = [
        RecordSource(topic=r.topic, partition=r.partition, offset=r.offset)
        for r in sorted(records, key=lambda r: r.offset)
    ]
    for n, (messages, source) in enumerate(zip(followed, sources, strict=True), start=1):
        assert {m.source for m in messages} == {source}
        assert all(m.request_metadata == {"submission": n} for m in messages)
        pages = [m for m in messages if isinstance(m, PageResult)]
        assert sorted(p.url for p in pages) == sorted(urls)
        terminal = [m for m in messages if isinstance(m, ProgressEvent) and m.is_terminal]
        assert [e.type for e in terminal] == [EventType.COMPLETED]
    assert [s.source for s in submissions] == sources
