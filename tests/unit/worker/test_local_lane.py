"""A worker of role `all` hands a page task to its own fetcher when that fetcher owns the
task's partition (`LocalLane`): no produce, fetch and commit of a page record, ~9 ms less
for a 1-URL request. On the in-memory pipeline with the real run, fetcher and scheduler:
which pages take the lane, and that what failover needs still holds (every page still
writes its `page` record; a lane page is in no `dispatched` record; a redelivered request
and a full backlog take the topic; a cancelled run's lane pages stop)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from inmemory import FakeSite, InMemoryPublisher, answer
from pipeline import SOURCE, Pipeline
from structlog.testing import capture_logs
from waiting import until

from service.contracts import CrawlOptions, CrawlRequest, CrawlSpec, EventType, FrontierRecord
from service.worker.fetcher.lane import LANE_RECORDS_BATCH, LaneRecords

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def made() -> AsyncIterator[list[Pipeline]]:
    pipelines: list[Pipeline] = []
    yield pipelines
    for pipeline in pipelines:
        await pipeline.close()


def _pipeline(made: list[Pipeline], site: FakeSite, owns) -> Pipeline:
    pipeline = Pipeline(site, local=owns)
    made.append(pipeline)
    return pipeline


def _request(request_id: str, urls: list[str]) -> CrawlRequest:
    return CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(render="http"))


def _frontier(pipeline: Pipeline, kind: str) -> list:
    return [r for r in pipeline.tail.records if r.kind == kind]


async def test_pages_of_hosts_this_fetcher_owns_skip_the_pages_topic(made):
    """Of two hosts, the one whose partition this fetcher owns is rendered here without a
    task on the pages topic; the other's tasks go to the topic. Every page has one result
    and one `page` record; only the topic's tasks are in a `dispatched` record."""
    pipeline = _pipeline(made, FakeSite(), owns=lambda key: key == "a.test")
    mine = [f"http://a.test/p/{i}" for i in range(5)]
    theirs = [f"http://b.test/p/{i}" for i in range(3)]

    await pipeline.execute(pipeline.run(_request("r", mine + theirs)))

    seen = pipeline.collected()
    [terminal] = seen.terminal("r")
    assert terminal.type == EventType.COMPLETED
    assert (terminal.succeeded, terminal.failed) == (8, 0)
    assert sorted(r.url for r in seen.results_of("r")) == sorted(mine + theirs)
    assert [t.url for t in pipeline.tasks] == theirs
    await pipeline.fetcher.lane_records.flush()  # the lane's records go several at a time
    assert sorted(r.url for r in _frontier(pipeline, "page")) == sorted(mine + theirs)
    dispatched = [url for r in _frontier(pipeline, "dispatched") for url in r.links]
    assert dispatched == theirs


async def test_a_deep_crawl_through_the_lane_writes_its_page_records_before_its_end(made):
    """A lane page's record waits to be written with others, but a deep crawl's terminal
    event comes after its pages' records: `map` reads them once it saw that event."""
    seed = "http://a.test/"
    links = "".join(f'<a href="/p/{i}">p{i}</a>' for i in range(3))
    site = FakeSite({seed: answer(seed, f"<html><body><main>{links}</main></body></html>")})
    pipeline = _pipeline(made, site, owns=lambda _key: True)
    pipeline.fetcher.lane_records = LaneRecords(pipeline.publisher, "crawl.frontier", linger_s=3600)
    request = CrawlRequest(
        request_id="d",
        urls=[seed],
        options=CrawlOptions(render="http"),
        crawl=CrawlSpec(max_pages=4, max_depth=1),
    )

    await pipeline.execute(pipeline.run(request))

    log = pipeline.publisher.log
    frontier = pipeline.settings.frontier_topic
    [terminal_at] = [
        i
        for i, m in enumerate(log)
        if m.topic == pipeline.settings.progress_topic and b'"completed"' in m.value
    ]
    pages = [
        FrontierRecord.model_validate_json(m.value).url
        for m in log[:terminal_at]
        if m.topic == frontier and b'"kind":"page"' in m.value
    ]
    assert sorted(pages) == sorted([seed, *(f"http://a.test/p/{i}" for i in range(3))])


async def test_a_redelivered_request_sends_every_page_through_the_topic(made):
    """Its worker may have died under a lane page, which no record counted: a redelivered
    request's pages take the topic, where each death is counted against its page."""
    pipeline = _pipeline(made, FakeSite(), owns=lambda _key: True)
    urls = [f"http://a.test/p/{i}" for i in range(4)]

    await pipeline.execute(pipeline.run(_request("r", urls), earlier=True))

    assert sorted(t.url for t in pipeline.tasks) == sorted(urls)
    [terminal] = pipeline.collected().terminal("r")
    assert terminal.succeeded == 4


async def test_pages_wait_at_the_coordinator_while_the_lane_has_no_room(made):
    """The memory gate pauses intake: the lane takes nothing, and the pages of keys this
    fetcher owns wait in their run (not on the topic, whose records would reach this same
    fetcher); once intake may go on, they are handed over and the run completes."""
    paused = [True]
    pipeline = Pipeline(FakeSite(), local=lambda _key: True, local_paused=lambda: paused[0])
    made.append(pipeline)
    urls = [f"http://a.test/p/{i}" for i in range(6)]
    run = asyncio.create_task(pipeline.execute(pipeline.run(_request("r", urls))))
    await until(lambda: pipeline.collected().events_of("r"))  # accepted: it runs

    await asyncio.sleep(0)
    assert pipeline.scheduler.pending == 0
    assert pipeline.tasks == []
    paused[0] = False
    await run

    [terminal] = pipeline.collected().terminal("r")
    assert (terminal.type, terminal.succeeded) == (EventType.COMPLETED, 6)
    assert pipeline.tasks == []


async def test_the_lane_takes_what_the_consumer_would_take(made):
    """Hanging pages of one run over four hosts, more than the backlog bound: the lane
    takes them as the pages consumer's intake would (its room is the same, the run's
    pages beyond its share overtakable), and none goes to the topic."""
    site = FakeSite(hanging="/hang/")
    pipeline = _pipeline(made, site, owns=lambda _key: True)
    window = pipeline.settings.dispatch_window
    hosts = [f"h{n}.test" for n in range(4)]
    urls = [f"http://{host}/hang/{i}" for host in hosts for i in range(window)]
    run = asyncio.create_task(pipeline.execute(pipeline.run(_request("r", urls))))

    await until(lambda: pipeline.scheduler.pending == len(urls))

    assert pipeline.tasks == []
    assert pipeline.scheduler.intake_backlog <= pipeline.settings.max_queued_pages
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)


async def test_a_cancelled_run_stops_its_lane_pages(made):
    """The run's task is cancelled (its request partition moved away): the pages it
    rendered here stop too, and the next owner of the request renders them."""
    site = FakeSite(hanging="/hang/")
    pipeline = _pipeline(made, site, owns=lambda _key: True)
    urls = [f"http://a.test/hang/{i}" for i in range(3)]
    run = asyncio.create_task(pipeline.execute(pipeline.run(_request("r", urls))))
    await until(lambda: len(site.closed) + sum(site.hits.values()) >= 3)

    run.cancel()
    await asyncio.gather(run, return_exceptions=True)

    await until(lambda: sorted(site.closed) == sorted(urls))
    assert pipeline.tasks == []
    assert pipeline.collected().results_of("r") == []


async def test_a_lane_page_failing_after_its_outcome_was_counted_gets_no_second_result(made):
    """The page record of a lane page cannot be published (a fatal error) after its result
    was and its run counted it: the error is logged, and no `internal` result contradicts
    the page's `ok` one (before, the lane's error boundary published a second result)."""
    pipeline = _pipeline(made, FakeSite(), owns=lambda key: key == "a.test")
    send = pipeline.publisher.send
    failed_once: list[bytes] = []

    async def page_records_fail_once(message):
        frontier = message.topic == pipeline.settings.frontier_topic
        if frontier and b'"kind":"page"' in message.value and not failed_once:
            failed_once.append(message.value)
            raise ValueError("no such record can be written")
        return await send(message)

    pipeline.publisher.send = page_records_fail_once  # type: ignore[method-assign]
    with capture_logs() as logs:
        await pipeline.execute(pipeline.run(_request("r", ["http://a.test/p/1"])))
        await pipeline.fetcher.lane_records.flush()  # a list run's records linger

    seen = pipeline.collected()
    assert failed_once
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["lane.records_failed"]
    [result] = seen.results_of("r")
    assert result.ok
    [terminal] = seen.terminal("r")
    assert (terminal.type, terminal.succeeded, terminal.failed) == (EventType.COMPLETED, 1, 0)


def _page_record(n: int) -> FrontierRecord:
    return FrontierRecord(
        request_id="r", source=SOURCE, kind="page", url=f"http://a.test/p/{n}", outcome="succeeded"
    )


async def test_local_pages_records_go_together_after_the_linger_or_a_full_batch():
    """A local page's record waits for others (the coordinator here already counted it):
    none is written before the linger or a full batch, then all that waited at once, in
    order; `flush` (a stopping worker) writes the rest without waiting."""
    publisher = InMemoryPublisher()
    records = LaneRecords(publisher, "crawl.frontier", linger_s=0.2)
    for n in range(3):
        records.add(_page_record(n), f"page:{n}")
    await asyncio.sleep(0)
    assert publisher.log == []
    await until(lambda: len(publisher.log) == 3)
    assert [FrontierRecord.model_validate_json(m.value).url for m in publisher.log] == [
        f"http://a.test/p/{n}" for n in range(3)
    ]

    slow = LaneRecords(publisher, "crawl.frontier", linger_s=3600)
    for n in range(LANE_RECORDS_BATCH + 2):
        slow.add(_page_record(100 + n), f"page:{100 + n}")
    await until(lambda: slow.pending == 2)
    assert len(publisher.log) == 3 + LANE_RECORDS_BATCH
    await slow.flush()
    assert len(publisher.log) == 3 + LANE_RECORDS_BATCH + 2
    assert slow.pending == 0
