"""Change tracking against the real broker, worker and Chromium, default settings: two
tracked runs of the same pages report `changed` pages with a diff, pages whose only change
is noise as `same` and a page now 404 as `removed`; another tag starts its own history; the
change feed holds exactly the changes."""

from __future__ import annotations

import asyncio
import uuid

import aiohttp
import pytest
from _changepages import version_words
from aiokafka import AIOKafkaConsumer, TopicPartition
from harness import produce, read_topic, requests_committed

from service.contracts import CrawlOptions, CrawlRequest, EventType, dump
from service.contracts_changes import ChangeRecord
from service.messaging.metadata import partitions_of

pytestmark = pytest.mark.integration

DEADLINE_S = 240.0
"""Generous: two shared cores, one worker, browser pages."""


async def _crawl(topics, collector, request_id: str, urls: list[str], **options: object):
    """The request's results by URL, once it completed."""
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    await produce(topics, [(request_id.encode(), dump(request))])
    await collector.wait_until(lambda seen: seen.terminal(request_id), deadline_s=DEADLINE_S)
    [terminal] = collector.seen.terminal(request_id)
    assert terminal.type == EventType.COMPLETED, terminal
    results = {result.url: result for result in collector.seen.results_of(request_id)}
    assert set(results) == set(urls)
    return results


async def _records_on(topics, topic: str) -> int:
    """How many records `topic` holds (the sum of its partitions' end offsets)."""
    numbers = await partitions_of(topics.settings(), topic)
    partitions = [TopicPartition(topic, p) for p in numbers]
    consumer = AIOKafkaConsumer(bootstrap_servers=topics.bootstrap, group_id=None)
    await consumer.start()
    try:
        async with asyncio.timeout(DEADLINE_S):
            consumer.assign(partitions)
            ends = await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()
    return sum(ends.values())


async def _post(site, path: str) -> None:
    async with aiohttp.ClientSession() as session, session.post(site.url(path)) as answer:
        assert answer.status == 200


async def test_two_tracked_runs_tell_changes_from_noise_and_removals(
    shared_topics, shared_collector, site, shared_worker
):
    """Six pages tracked twice, every page's clock, nonce, script, style and attributes
    different on every load: the two edited pages are `changed` with a diff of their old and
    new line, the three others `same`, the one now 404 `removed`; every page of the second
    run has its `previous_fetched_at`; a run under another tag finds every page `new`; the
    change feed holds one record per change and none for `same`."""
    prefix = uuid.uuid4().hex[:8]
    names = [f"{prefix}-{i}" for i in range(6)]
    urls = [site.url(f"/changes/p/{name}") for name in names]
    edited, gone, quiet = names[:2], names[2], names[3:]
    tracking = {"change_tracking": {"diff": True}}
    first_id, second_id, tagged_id = (f"ct{i}-{uuid.uuid4().hex}" for i in range(3))
    first = await _crawl(shared_topics, shared_collector, first_id, urls, **tracking)
    for name in edited:
        await _post(site, f"/changes/edit/{name}")
    await _post(site, f"/changes/remove/{gone}")
    second = await _crawl(shared_topics, shared_collector, second_id, urls, **tracking)

    def status(results, name: str) -> str | None:
        change = results[site.url(f"/changes/p/{name}")].change_tracking
        return None if change is None else change.status

    assert {status(first, name) for name in names} == {"new"}
    assert [status(second, name) for name in edited] == ["changed", "changed"]
    assert [status(second, name) for name in quiet] == ["same", "same", "same"]
    assert status(second, gone) == "removed"
    for name in edited:
        change = second[site.url(f"/changes/p/{name}")].change_tracking
        assert change is not None
        lines = (change.diff or "").splitlines()
        assert f"-{version_words(name, 0)}" in lines, change.diff
        assert f"+{version_words(name, 1)}" in lines, change.diff
    for url in urls:
        change = second[url].change_tracking
        assert change is not None
        assert change.previous_fetched_at is not None
        assert first[url].fetched_at >= change.previous_fetched_at
    assert second[site.url(f"/changes/p/{quiet[0]}")].change_tracking.diff is None

    answering = [site.url(f"/changes/p/{name}") for name in [*edited, *quiet]]
    tagged = await _crawl(
        shared_topics,
        shared_collector,
        tagged_id,
        answering,
        change_tracking={"tag": "weekly", "diff": True},
    )
    assert {result.change_tracking.status for result in tagged.values()} == {"new"}

    expected = {
        first_id: {(url, "new") for url in urls},
        second_id: {
            *((site.url(f"/changes/p/{name}"), "changed") for name in edited),
            (site.url(f"/changes/p/{gone}"), "removed"),
        },
        tagged_id: {(url, "new") for url in answering},
    }
    records = await _all_records(shared_topics)
    feed = [
        record
        for record in map(_change_of, records)
        if record.request_id in {first_id, second_id, tagged_id}
    ]
    assert len(feed) == sum(map(len, expected.values()))  # no `same`, nothing twice
    for request_id, wanted in expected.items():
        found = [(r.url, r.status) for r in feed if r.request_id == request_id]
        assert sorted(found) == sorted(wanted), request_id
    assert all(record.key.decode() == _change_of(record).url for record in records)
    removal = next(r for r in feed if r.status == "removed")
    assert removal.previous_sha256 is not None
    assert removal.content_sha256 is None
    change = next(r for r in feed if r.status == "changed")
    assert change.diff_bytes > 0
    assert change.previous_fetched_at is not None


@pytest.mark.long_running
async def test_the_fetcher_that_takes_over_compares_with_the_history_left_on_kafka(
    topics, collector, site, start_worker
):
    """kill -9 of the worker that tracked three pages: the worker that takes the partitions
    over reads their histories from the topic and finds the edited page `changed`, with
    the diff of the Markdown the first one kept, and the others `same`."""
    prefix = uuid.uuid4().hex[:8]
    names = [f"{prefix}-k{i}" for i in range(3)]
    urls = [site.url(f"/changes/p/{name}") for name in names]
    tracking = {"change_tracking": {"diff": True, "tag": "takeover"}}
    first_worker = await start_worker("t-first")
    first = await _crawl(topics, collector, f"tk1-{uuid.uuid4().hex}", urls, **tracking)
    assert {result.change_tracking.status for result in first.values()} == {"new"}
    # killed once its request is committed: else the next worker runs it again, after the
    # edit below, and that run is what the second one compares with
    await requests_committed(topics)
    await first_worker.kill()
    await _post(site, f"/changes/edit/{names[0]}")
    await start_worker("t-second")
    second = await _crawl(topics, collector, f"tk2-{uuid.uuid4().hex}", urls, **tracking)
    statuses = [second[url].change_tracking.status for url in urls]
    assert statuses == ["changed", "same", "same"]
    diff = (second[urls[0]].change_tracking.diff or "").splitlines()
    assert f"-{version_words(names[0], 0)}" in diff
    assert f"+{version_words(names[0], 1)}" in diff


async def test_a_tracked_deep_crawl_reports_the_pages_it_no_longer_reaches(
    shared_topics, shared_collector, site, shared_worker
):
    """A hub and its four pages crawled twice under one tag; between the crawls the hub
    stops linking page 1 (which still answers) and page 2 (now 404), and page 3 (still
    linked) is removed. The second crawl reports page 1 `removed` and `hidden`, page 2
    `removed` and `visible`, page 3 `removed` (fetched: 404), page 0 `same` (the hub
    `changed`); the results count in the run's total; the feed has the hub's change and
    the three removals."""
    name = f"hub-{uuid.uuid4().hex[:8]}"
    hub = site.url(f"/changes/hub/{name}")
    pages = [site.url(f"/changes/p/{name}-{i}") for i in range(4)]
    spec = {"max_pages": 10, "max_depth": 1}
    tracking = CrawlOptions(change_tracking={"tag": "deep"})

    async def deep(request_id: str):
        request = CrawlRequest(request_id=request_id, urls=[hub], options=tracking, crawl=spec)
        await produce(shared_topics, [(request_id.encode(), dump(request))])
        await shared_collector.wait_until(
            lambda seen: seen.terminal(request_id), deadline_s=DEADLINE_S
        )
        [terminal] = shared_collector.seen.terminal(request_id)
        assert terminal.type == EventType.COMPLETED, terminal
        results = {r.url: r for r in shared_collector.seen.results_of(request_id)}
        assert terminal.total == len(results)
        return results

    first_id, second_id = f"d1-{uuid.uuid4().hex}", f"d2-{uuid.uuid4().hex}"
    first = await deep(first_id)
    assert set(first) == {hub, *pages}, [(r.url, r.error) for r in first.values()]
    assert {r.change_tracking.status for r in first.values()} == {"new"}
    for i in (1, 2):
        await _post(site, f"/changes/unlink/{name}/{i}")
    for i in (2, 3):
        await _post(site, f"/changes/remove/{name}-{i}")
    second = await deep(second_id)
    assert set(second) == {hub, *pages}
    change = {url: result.change_tracking for url, result in second.items()}
    assert change[hub].status == "changed"  # two of its links went
    assert change[pages[0]].status == "same"
    assert (change[pages[1]].status, change[pages[1]].visibility) == ("removed", "hidden")
    assert (change[pages[2]].status, change[pages[2]].visibility) == ("removed", "visible")
    assert change[pages[3]].status == "removed"
    assert all(c.previous_fetched_at is not None for c in change.values())
    assert second[pages[1]].ok
    assert second[pages[2]].status_code == 404

    feed = await _feed_of(shared_topics, second_id)
    removals = [(url, "removed") for url in pages[1:]]
    assert sorted((r.url, r.status) for r in feed) == sorted([(hub, "changed"), *removals])


async def _feed_of(topics, request_id: str) -> list[ChangeRecord]:
    """The change records of `request_id`."""
    feed = map(_change_of, await _all_records(topics))
    return [record for record in feed if record.request_id == request_id]


async def _all_records(topics) -> list[object]:
    """Every record of the change topic (shared by the module's tests), read to its end."""
    total = await _records_on(topics, topics.changes)
    return await read_topic(topics.bootstrap, topics.changes, total, DEADLINE_S)


def _change_of(record) -> ChangeRecord:
    return ChangeRecord.model_validate_json(record.value)
