"""One page record at the fetcher (`Fetcher.handle`) on the in-memory pipeline: a cancel or
the run's deadline stops the page with that result, a poison record is answered without a
render, and each answer is the page's result followed by its `page` frontier record."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from inmemory import FakeSite
from pipeline import FIRST_DELIVERY, SOURCE, Pipeline
from waiting import until

from service.contracts import CrawlOptions, ErrorCode, FrontierRecord, PageTask, dump, utc_now
from service.messaging.offsets import Delivery, Verdict
from service.messaging.seal import Seal
from service.settings import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from service.contracts import PageResult

URL = "http://site.test/hang/1"
PAGES = Settings().pages_topic


@pytest.fixture
async def hanging() -> AsyncIterator[tuple[Pipeline, FakeSite]]:
    site = FakeSite(hanging="/hang/")
    pipeline = Pipeline(site)
    yield pipeline, site
    await pipeline.close()


def _task(url: str = URL, **fields: object) -> PageTask:
    return PageTask(
        request_id="r",
        run_id="run-1",
        url=url,
        options=CrawlOptions(render="http", deadline_ms=200),
        source=SOURCE,
        **fields,  # type: ignore[arg-type]
    )


def _answer(pipeline: Pipeline) -> tuple[PageResult, FrontierRecord]:
    [result] = pipeline.collected().results_of("r")
    [record] = [r for r in pipeline.tail.records if r.kind == "page"]
    return result, record


async def test_a_cancel_reaching_a_rendering_page_stops_it_cancelled(hanging):
    """The page is rendering when the cancel arrives: the fetch is closed, the result is
    `cancelled` and the page record says so, so its coordinator counts it cancelled."""
    pipeline, site = hanging
    page = asyncio.create_task(pipeline.page(_task()))
    await until(site.started.is_set)

    pipeline.cancel("r", "user asked")
    await page

    result, record = _answer(pipeline)
    assert result.error is not None
    assert result.error.code == ErrorCode.CANCELLED
    assert (record.outcome, record.error_code, record.run_id) == ("cancelled", "cancelled", "run-1")
    assert site.closed == [URL]
    assert (pipeline.scheduler.in_flight, pipeline.scheduler.backlog) == (0, 0)


async def test_a_cancelled_page_is_answered_before_its_render_has_closed():
    """Closing a stopped page can take seconds (a page in a loaded Chromium): its
    `cancelled` result does not wait for that; the render keeps its slot and its run keeps
    its context until it has closed, and the fetcher's close waits for it."""
    slow_close = asyncio.Event()
    site = FakeSite(hanging="/hang/", slow_close=slow_close)
    pipeline = Pipeline(site)
    try:
        page = asyncio.create_task(pipeline.page(_task()))
        await until(site.started.is_set)

        pipeline.cancel("r", "user asked")
        async with asyncio.timeout(5):
            await page

        result, record = _answer(pipeline)
        assert result.error is not None
        assert result.error.code == ErrorCode.CANCELLED
        assert record.outcome == "cancelled"
        assert site.closed == []  # still closing
        assert pipeline.scheduler.in_flight == 1
        assert pipeline.fetcher.contexts.holders("run-1") == 1

        slow_close.set()
        await until(lambda: pipeline.scheduler.in_flight == 0)
        await until(lambda: pipeline.fetcher.contexts.holders("run-1") == 0)
        assert site.closed == [URL]
    finally:
        slow_close.set()
        await pipeline.close()


async def test_a_page_of_a_cancelled_request_is_not_rendered(hanging):
    """A cancel already read when the page arrives: `cancelled` at once, nothing fetched."""
    pipeline, site = hanging
    pipeline.cancel("r")

    await pipeline.page(_task())

    result, record = _answer(pipeline)
    assert result.error is not None
    assert result.error.code == ErrorCode.CANCELLED
    assert record.outcome == "cancelled"
    assert site.hits[URL] == 0
    assert pipeline.charged == []


async def test_a_page_past_its_deadline_is_answered_deadline_without_a_fetch(hanging):
    """`deadline_at` already passed: `deadline`, counted failed, nothing fetched."""
    pipeline, site = hanging

    await pipeline.page(_task(deadline_at=utc_now() - timedelta(seconds=1)))

    result, record = _answer(pipeline)
    assert result.error is not None
    assert result.error.code == ErrorCode.DEADLINE
    assert (record.outcome, record.error_code) == ("failed", "deadline")
    assert site.hits[URL] == 0


async def test_a_page_rendering_at_its_deadline_is_stopped_there(hanging):
    """`deadline_at` reached mid-render: the fetch is closed, the result is `deadline`."""
    pipeline, site = hanging

    async with asyncio.timeout(2.0):
        await pipeline.page(_task(deadline_at=utc_now() + timedelta(milliseconds=100)))

    result, _ = _answer(pipeline)
    assert result.error is not None
    assert result.error.code == ErrorCode.DEADLINE
    assert site.closed == [URL]
    assert len(pipeline.charged) == 1  # its render began: a death from here is counted
    assert pipeline.uncharged == pipeline.charged  # and it ended: no longer counted


async def test_a_poison_record_is_answered_without_a_render(hanging):
    """Verdict POISON: a `poison` result naming the deliveries, nothing fetched."""
    pipeline, site = hanging

    await pipeline.page(_task(), Delivery(Verdict.POISON, 4, earlier=True))

    result, record = _answer(pipeline)
    assert result.error is not None
    assert result.error.code == ErrorCode.POISON
    assert "delivered 4 times" in result.error.message
    assert record.error_code == "poison"
    assert site.hits[URL] == 0


async def test_a_record_that_is_not_a_page_task_goes_to_the_dead_letters(hanging):
    """Unreadable: a dead letter, no result, no page record, and the fetcher goes on."""
    pipeline, _ = hanging
    record = pipeline.record("site.test", b'{"not": "a task"}')

    await pipeline.fetcher.handle(record, Delivery(Verdict.RUN, 1), pipeline.owned)

    topics = [m.topic for m in pipeline.publisher.log]
    assert topics == [pipeline.settings.dead_letter_topic]
    assert pipeline.tail.records == []
    assert (pipeline.scheduler.in_flight, pipeline.scheduler.backlog) == (0, 0)


async def test_a_page_waiting_for_its_result_to_be_acknowledged_is_no_backlog(hanging):
    """Once its content is there, a page leaves the scheduler's count while its result is
    published: before, pages that only waited for acknowledgements (as long as an HTTP page
    renders, on a busy broker) filled the backlog, and intake paused with every slot idle."""
    pipeline, _ = hanging
    loop = asyncio.get_running_loop()
    acknowledge = asyncio.Event()
    send = pipeline.publisher.send
    waiting: list[asyncio.Task[None]] = []

    async def unacknowledged_results(message):  # the broker takes results, answers later
        delivery = await send(message)
        if message.topic != pipeline.settings.results_topic:
            return delivery
        later = loop.create_future()
        waiting.append(asyncio.create_task(_resolve_when(acknowledge, later)))
        return later

    pipeline.publisher.send = unacknowledged_results  # type: ignore[method-assign]
    page = asyncio.create_task(pipeline.page(_task("http://site.test/a")))
    await until(lambda: waiting)

    assert (pipeline.scheduler.pending, pipeline.scheduler.backlog) == (0, 0)
    assert not page.done()
    assert pipeline.tail.records == []  # its page record waits for the result's ack

    acknowledge.set()
    await page
    result, record = _answer(pipeline)
    assert result.ok
    assert record.outcome == "succeeded"


async def _resolve_when(event: asyncio.Event, future: asyncio.Future[None]) -> None:
    await event.wait()
    future.set_result(None)


async def test_page_records_waiting_for_a_slot_count_in_their_partitions_queue(hanging):
    """Six records of one host, which renders at most four pages at once: two wait in their
    partition's queue (`queued`, which holds the partition once a slot's worth wait) however
    many slots are free; as pages end, the waiting ones get slots and leave the queue."""
    pipeline, _ = hanging
    per_host = pipeline.settings.max_pages_per_host
    deadline_at = utc_now() + timedelta(seconds=2)
    records = [
        pipeline.record("site.test", dump(_task(f"{URL}{n}", deadline_at=deadline_at)))
        for n in range(per_host + 2)
    ]
    partition = records[0].partition
    pages = [
        asyncio.create_task(pipeline.fetcher.handle(record, FIRST_DELIVERY, pipeline.owned))
        for record in records
    ]
    await until(lambda: pipeline.scheduler.in_flight == per_host)
    await until(lambda: pipeline.fetcher.queued(partition) <= 2)  # their renders began
    assert pipeline.fetcher.queued(partition) == 2  # no more than the host's limit started
    assert pipeline.scheduler.in_flight == per_host
    assert pipeline.fetcher.queued(partition + 1) == 0
    async with asyncio.timeout(5.0):
        await asyncio.gather(*pages)  # each stopped at its deadline
    assert pipeline.fetcher.queued(partition) == 0
    assert len(pipeline.collected().results_of("r")) == len(records)


async def test_room_in_the_backlog_goes_to_the_oldest_run_waiting_first(hanging):
    """Runs waiting for room in this process's fetcher (the local lane) are woken one per
    page that leaves the backlog, oldest request first, whoever asked first: before, the
    first to ask went first, so every run took turns and held a browser context the while."""
    pipeline, _ = hanging
    newer = pipeline.fetcher.backlog_left(priority=300)
    oldest = pipeline.fetcher.backlog_left(priority=100)
    older = pipeline.fetcher.backlog_left(priority=200)

    await pipeline.page(_task("http://site.test/a"))
    assert oldest.done()
    assert not older.done()
    assert not newer.done()
    await pipeline.page(_task("http://site.test/b"))
    assert older.done()
    assert not newer.done()


async def test_a_page_waiting_for_its_hosts_pace_is_set_aside_and_out_of_its_queue():
    """The second page of a run paced at `delay_ms` waits for its turn: its record is set
    aside (the partition is read past it) and it is not in its partition's queue; cancelled
    there (the worker stops), it leaves nothing behind in the queue."""
    pipeline = Pipeline(FakeSite())
    first = _task("http://site.test/page/1", delay_ms=60_000)
    second = _task("http://site.test/page/2", delay_ms=60_000)
    records = [pipeline.record("site.test", dump(task)) for task in (first, second)]
    handled = [
        asyncio.create_task(pipeline.fetcher.handle(record, FIRST_DELIVERY, pipeline.owned))
        for record in records
    ]
    await until(lambda: pipeline.answered(first.url) and len(pipeline.aside) == 1)
    partition = records[1].partition
    assert pipeline.aside == {(partition, records[1].offset)}
    assert pipeline.fetcher.queued(partition) == 0
    handled[1].cancel()
    await asyncio.gather(*handled, return_exceptions=True)
    assert pipeline.aside == set()
    assert pipeline.fetcher.queued(partition) == 0
    await pipeline.close()


@pytest.mark.parametrize("writer", ["another deployment", "a forger"])
async def test_a_page_record_not_of_this_deployment_gets_no_answer_at_all(hanging, writer):
    """A task of another deployment (its own tag), or one without a valid tag: not
    rendered, no result, no page record, no dead letter; the record is finished."""
    pipeline, site = hanging
    value = dump(_task("http://site.test/page/1"))
    if writer == "another deployment":
        other = Settings(worker_name="unit", group_id="elsewhere", pages_topic=PAGES)
        headers = Seal.from_settings(other).headers(PAGES, b"site.test", value)
    else:
        headers = [("crawlstream-tag", b"0" * 64)]
    record = pipeline.record("site.test", value, headers, sealed=False)

    await pipeline.fetcher.handle(record, FIRST_DELIVERY, pipeline.owned)

    assert pipeline.publisher.log == []
    assert site.hits == {}
    assert (pipeline.scheduler.in_flight, pipeline.scheduler.backlog) == (0, 0)
