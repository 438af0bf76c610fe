"""One request's run on an in-memory pipeline: the coordinator (`Run`) dispatches page tasks
that a real fetcher renders, and learns each outcome from the frontier records it writes.
Cancels, the request's deadline, final HTTP answers, robots.txt, a small request beside a big
one, the dispatch window, a redelivered request, a deep crawl's fold and a poison page, with
the real scheduler, renderer (HTTP path), robots cache, outbox and plans. The end-to-end
versions of what needs real infrastructure (Chromium pages closed on a cancel, a cancel read
from the control topic, retries seen by the browser) are in tests/integration."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING

import pytest
from _routes import ROBOTS_TXT
from inmemory import FakeRobotsSource, FakeSite, answer
from pipeline import Pipeline
from structlog.testing import capture_logs
from waiting import until

from service.contracts import (
    CrawlOptions,
    CrawlRequest,
    CrawlSpec,
    ErrorCode,
    EventType,
    utc_now,
)
from service.control.registry import Cancel
from service.http.robots import RobotsFile
from service.messaging.offsets import Delivery, Verdict

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from service.contracts import PageResult

SITE = "http://site.test"
OTHER = "http://other.test"


@pytest.fixture
async def make() -> AsyncIterator[list[Pipeline]]:
    """Pipelines a test builds, closed after it (pages of runs it gave up on)."""
    made: list[Pipeline] = []
    yield made
    for pipeline in made:
        await pipeline.close()


def _pipeline(made: list[Pipeline], site: object, **kwargs: object) -> Pipeline:
    pipeline = Pipeline(site, **kwargs)  # type: ignore[arg-type]
    made.append(pipeline)
    return pipeline


def _request(request_id: str, urls: list[str], **options: object) -> CrawlRequest:
    return CrawlRequest(
        request_id=request_id, urls=urls, options=CrawlOptions(render="http", **options)
    )


def _urls(prefix: str, count: int, site: str = SITE) -> list[str]:
    return [f"{site}/{prefix}/{i}" for i in range(count)]


def _assert_exact(pipeline: Pipeline, request_id: str, urls: list[str], kind: EventType) -> list:
    """One terminal of `kind`; every URL has exactly one result in that run; the counts are
    those of the results; nothing of the run comes after its terminal event."""
    seen = pipeline.collected()
    [terminal] = seen.terminal(request_id)
    assert terminal.type == kind, terminal
    results = [r for r in seen.results_of(request_id) if r.run_id == terminal.run_id]
    _assert_counts(terminal, results, urls)
    run = [e for e in seen.events_of(request_id) if e.run_id == terminal.run_id]
    assert run[0].type == EventType.ACCEPTED
    assert run[-1] is terminal
    assert [e.seq for e in run] == list(range(len(run)))
    return results


def _assert_counts(terminal, results: list[PageResult], urls: list[str]) -> None:
    assert Counter(r.url for r in results) == Counter(urls)
    codes = Counter(r.error.code for r in results if r.error is not None)
    assert terminal.total == len(urls)
    assert terminal.succeeded == sum(r.ok for r in results)
    assert terminal.cancelled == codes[ErrorCode.CANCELLED]
    assert terminal.failed == len(results) - terminal.succeeded - terminal.cancelled


def _results(pipeline: Pipeline, request_id: str) -> list[PageResult]:
    return pipeline.collected().results_of(request_id)


async def test_cancel_stops_a_running_request_and_closes_its_pages(make):
    """A 30-URL request cancelled after its 3rd result (the other pages hang): the run ends
    `cancelled` with the reason, every URL has exactly one result, no page event follows the
    terminal, every page still running was closed and no page slot stays taken."""
    urls = _urls("quick", 3) + _urls("hang", 27)
    site = FakeSite(hanging="/hang/")
    pipeline = _pipeline(make, site)
    task = asyncio.create_task(pipeline.execute(pipeline.run(_request("c30", urls))))
    await until(lambda: len(_results(pipeline, "c30")) >= 3)

    pipeline.cancel("c30", "user asked")
    await task
    await pipeline.drained()

    results = _assert_exact(pipeline, "c30", urls, EventType.CANCELLED)
    [terminal] = pipeline.collected().terminal("c30")
    assert terminal.detail == "cancelled: user asked"
    assert terminal.succeeded >= 3
    assert terminal.cancelled > 0
    assert all(r.ok or r.error.code == ErrorCode.CANCELLED for r in results)
    started_hanging = [url for url in site.hits if "/hang/" in url]
    assert started_hanging
    assert sorted(site.closed) == sorted(started_hanging)
    assert (pipeline.scheduler.in_flight, pipeline.scheduler.backlog) == (0, 0)


async def test_a_request_cancelled_before_it_runs_renders_nothing(make):
    """A cancel already read from the control topic: the request ends `cancelled` with an
    `accepted`, a `cancelled` result per URL, no page dispatched and none fetched."""
    site = FakeSite()
    pipeline = _pipeline(make, site)
    pipeline.cancel("early", "changed my mind")
    urls = _urls("early", 5)

    await pipeline.execute(pipeline.run(_request("early", urls)))

    results = _assert_exact(pipeline, "early", urls, EventType.CANCELLED)
    assert all(r.error.code == ErrorCode.CANCELLED for r in results)
    [terminal] = pipeline.collected().terminal("early")
    assert terminal.detail == "cancelled: changed my mind"
    assert pipeline.tasks == []
    assert site.hits == Counter()


async def test_deadline_ends_the_request_expired_with_exact_counts(make):
    """`deadline_ms` on 35 pages of which 30 hang: the run ends `expired` within its budget;
    pages that did not finish get `deadline` results (from their fetcher, or from the
    coordinator for those never dispatched); counts are exact."""
    budget_ms = 300  # the request's own option, short because the hanging pages never end
    urls = _urls("quick", 5) + _urls("hang", 30)  # more than the window (16): some wait
    site = FakeSite(hanging="/hang/")
    pipeline = _pipeline(make, site)
    loop = asyncio.get_running_loop()
    started = loop.time()

    await pipeline.execute(pipeline.run(_request("dl", urls, deadline_ms=budget_ms)))

    assert loop.time() - started < budget_ms / 1000 + 1.0
    await pipeline.drained()
    results = _assert_exact(pipeline, "dl", urls, EventType.EXPIRED)
    [terminal] = pipeline.collected().terminal("dl")
    assert terminal.detail is not None
    assert terminal.detail.startswith("deadline")
    assert terminal.cancelled == 0
    assert terminal.failed > 0
    assert all(r.ok or r.error.code == ErrorCode.DEADLINE for r in results)
    dispatched = {task.url for task in pipeline.tasks}
    assert all(task.deadline_at is not None for task in pipeline.tasks)
    assert dispatched < set(urls)  # some pages never left the coordinator
    assert (pipeline.scheduler.in_flight, pipeline.scheduler.backlog) == (0, 0)


async def test_not_found_is_not_retried_but_service_unavailable_is(make):
    """A 404 is a final answer: one fetch, `http_error` 404, no retry. A 503 on the same run
    (the contrast that shows retries would be seen) is tried `page_retries` more times."""
    missing, busy = f"{SITE}/status/404", f"{SITE}/status/503"
    site = FakeSite(
        {
            missing: answer(missing, "<html><body>gone</body></html>", status=404),
            busy: answer(busy, "<html><body>busy</body></html>", status=503, retry_after="0"),
        }
    )
    pipeline = _pipeline(make, site)
    with capture_logs() as logs:
        await pipeline.execute(pipeline.run(_request("r-404", [missing, busy])))

    results = _assert_exact(pipeline, "r-404", [missing, busy], EventType.COMPLETED)
    by_url = {r.url: r for r in results}
    assert by_url[missing].error is not None
    assert (by_url[missing].error.code.value, by_url[missing].status_code) == ("http_error", 404)
    assert site.hits[missing] == 1
    retried = [e["url"] for e in logs if e["event"] == "page.retrying"]
    assert missing not in retried
    assert retried == [busy] * pipeline.settings.page_retries
    assert site.hits[busy] == pipeline.settings.page_retries + 1
    [finished] = [e for e in logs if e["event"] == "request.finished"]
    assert (finished["outcome"], finished["total"], finished["failed"]) == ("completed", 2, 2)
    assert finished["elapsed_ms"] >= 0


async def test_robots_txt_is_respected_when_asked(make):
    """With `respect_robots`, a disallowed URL gets `robots` without being fetched, an allowed
    one is crawled, and robots.txt is fetched once; without it, the private page is crawled."""
    site = FakeSite()
    robots = FakeRobotsSource({f"{SITE}/robots.txt": RobotsFile(status=200, text=ROBOTS_TXT)})
    pipeline = _pipeline(make, site, robots=robots)
    private, allowed = f"{SITE}/private/a", f"{SITE}/page/1"
    ignored = f"{SITE}/private/a-x"

    await pipeline.execute(
        pipeline.run(_request("r-robots", [private, allowed], respect_robots=True))
    )
    await pipeline.execute(pipeline.run(_request("r-ignore", [ignored])))

    results = {
        r.url: r
        for r in _assert_exact(pipeline, "r-robots", [private, allowed], EventType.COMPLETED)
    }
    refused, crawled = results[private], results[allowed]
    assert refused.error is not None
    assert (refused.ok, refused.error.code.value) == (False, "robots")
    assert site.hits[private] == 0
    assert (crawled.ok, crawled.status_code) == (True, 200)
    assert robots.fetched == [f"{SITE}/robots.txt"]
    [ignored_result] = _assert_exact(pipeline, "r-ignore", [ignored], EventType.COMPLETED)
    assert (ignored_result.ok, ignored_result.status_code) == (True, 200)
    assert site.hits[ignored] == 1


async def test_small_request_finishes_while_a_big_request_of_hanging_pages_runs(make):
    """With default limits, a 1-URL request taken right after a 100-URL request of hanging
    pages completes while the big one is still running: the big request's queued pages do
    not keep the small one from a slot."""
    site = FakeSite(hanging="/hang/")
    pipeline = _pipeline(make, site)
    # The big request's pages time out after 1 s (the least a page attempt gets) rather than
    # the integration test's 3 s: how long they hang does not change who gets the next slot.
    big = pipeline.run(_request("big", _urls("hang", 100), timeout_ms=1000), priority=0)
    big_task = asyncio.create_task(pipeline.execute(big))
    await until(site.started.is_set)
    await until(lambda: pipeline.scheduler.backlog > 0)  # the big request's pages wait

    small = pipeline.run(_request("small", [f"{SITE}/page/1"]), priority=1)
    await pipeline.execute(small)

    seen = pipeline.collected()
    [terminal] = seen.terminal("small")
    assert (terminal.type, terminal.succeeded) == (EventType.COMPLETED, 1)
    assert seen.terminal("big") == []
    assert not big_task.done()
    big_task.cancel()
    await asyncio.gather(big_task, return_exceptions=True)


async def test_the_dispatch_window_holds_one_hosts_pages_but_not_other_hosts(make):
    """CRAWL_DISPATCH_WINDOW (16, the default): of 40 pages of a host whose fetcher does not
    answer, 16 are dispatched and the rest wait at the coordinator; the request's pages of
    another host are dispatched and answered meanwhile; as answers come, the rest follow,
    never more than 16 unanswered at once; the run completes with exact counts."""
    slow, quick = _urls("a", 40), _urls("b", 3, site=OTHER)
    pipeline = _pipeline(make, FakeSite())
    pipeline.holding = lambda task: task.url.startswith(SITE)
    window = pipeline.settings.dispatch_window
    assert window == 16
    task = asyncio.create_task(pipeline.execute(pipeline.run(_request("win", slow + quick))))

    await until(lambda: all(pipeline.answered(url) for url in quick))
    await asyncio.sleep(0.01)  # the coordinator has taken the answers; nothing else comes
    assert len(pipeline.held) == window
    assert [t.url for t in pipeline.tasks if t.url in slow] == slow[:window]

    while not task.done():
        pipeline.release()
        await asyncio.sleep(0)
    await task

    _assert_exact(pipeline, "win", slow + quick, EventType.COMPLETED)
    assert Counter(t.url for t in pipeline.tasks) == Counter(slow + quick)
    [run_id] = {t.run_id for t in pipeline.tasks}
    assert pipeline.peak[(run_id, "site.test")] == window
    assert pipeline.peak[(run_id, "other.test")] == len(quick)


async def test_a_redelivered_request_replays_what_its_earlier_run_left(make):
    """A coordinator dies with 3 of 20 pages answered, 16 (the window) dispatched and
    unanswered and one never dispatched; the next run of the record (`earlier`) counts the 3
    (with a page event of its own each: the first run may have died before sending theirs),
    waits for the 16 (a fetcher still answers them; they fill the host's window) without
    sending them again, dispatches the last one once the window allows, and completes with
    every page counted once."""
    urls = _urls("p", 20)
    pipeline = _pipeline(make, FakeSite())
    pipeline.holding = lambda _task: True
    request = _request("again", urls)
    first = pipeline.run(request)
    first_task = asyncio.create_task(pipeline.execute(first))
    await until(lambda: len(pipeline.held) == 16)
    pipeline.release(where=lambda task: task.url in urls[:3])
    await until(lambda: len(pipeline.held) == 16 and len(pipeline.tasks) == 19)
    await until(lambda: len(_logged_dispatched(pipeline)) == 19)
    first_task.cancel()  # the coordinator dies; its record goes to the next owner
    await asyncio.gather(first_task, return_exceptions=True)

    second = pipeline.run(request, earlier=True)
    second_task = asyncio.create_task(pipeline.execute(second))
    await until(lambda: pipeline.tail.subscribed("again") == 1)
    await asyncio.sleep(0.01)
    assert len(pipeline.tasks) == 19  # the 16 waited for fill the host's window
    pipeline.holding = lambda _task: False
    pipeline.release()
    await second_task

    seen = pipeline.collected()
    [terminal] = seen.terminal("again")
    assert (terminal.type, terminal.run_id) == (EventType.COMPLETED, second.run_id)
    _assert_counts(terminal, seen.results_of("again"), urls)
    assert Counter(t.url for t in pipeline.tasks) == Counter(urls)  # none sent twice
    assert [t.url for t in pipeline.tasks if t.run_id == second.run_id] == urls[19:]
    events = [e for e in seen.events_of("again") if e.run_id == second.run_id]
    assert [e.seq for e in events] == list(range(len(events)))
    pages = [e.url for e in events if e.type in {EventType.PAGE_SUCCEEDED, EventType.PAGE_FAILED}]
    assert sorted(pages) == sorted(urls)  # the run's events name every page, once each
    assert second.run_id in pipeline.relieved


def _logged_dispatched(pipeline: Pipeline) -> list[str]:
    return [url for r in pipeline.tail.records if r.kind == "dispatched" for url in r.links]


def _linked(url: str, *paths: str) -> object:
    links = "".join(f'<a href="{path}">{path}</a>' for path in paths)
    return answer(url, f"<html><title>{url}</title><body>{links}</body></html>")


async def test_a_deep_crawl_admits_the_same_pages_whatever_order_outcomes_arrive_in(make):
    """Seed -> a/0..a/4 -> a/i/0..2, budget 8: the admitted set is the seed, the five a's
    and the first two links of a/0 (folded in admission order) even though a/4..a/0 are
    answered last first; no other page is dispatched, counts are exact."""
    seed = f"{SITE}/"
    middle = [f"{SITE}/a/{i}" for i in range(5)]
    pages = {seed: _linked(seed, *(f"/a/{i}" for i in range(5)))}
    for i, url in enumerate(middle):
        pages[url] = _linked(url, *(f"/a/{i}/{j}" for j in range(3)))
    pipeline = _pipeline(make, FakeSite(pages))  # type: ignore[arg-type]
    pipeline.holding = lambda _task: True
    request = CrawlRequest(
        request_id="deep",
        urls=[seed],
        options=CrawlOptions(render="http"),
        crawl=CrawlSpec(max_pages=8, max_depth=2),
    )
    task = asyncio.create_task(pipeline.execute(pipeline.run(request)))
    await until(lambda: len(pipeline.held) == 1)
    pipeline.release()
    await until(lambda: len(pipeline.held) == len(middle))
    for url in reversed(middle):
        pipeline.release(where=lambda t, url=url: t.url == url)
        await until(lambda url=url: pipeline.answered(url))
    await until(lambda: len(pipeline.held) == 2)
    pipeline.release()
    await task

    expected = [seed, *middle, f"{SITE}/a/0/0", f"{SITE}/a/0/1"]
    _assert_exact(pipeline, "deep", expected, EventType.COMPLETED)
    assert [t.url for t in pipeline.tasks] == expected
    assert {t.depth for t in pipeline.tasks if t.url.count("/") == 5} == {2}
    [terminal] = pipeline.collected().terminal("deep")
    assert terminal.detail is not None
    assert terminal.detail.startswith("budget spent: max_pages 8 reached")


async def test_a_poison_page_gets_a_poison_result_and_the_run_completes(make):
    """A page record delivered too often to fetchers that died rendering it is answered
    `poison` without a fetch; the run's other pages are crawled and it completes."""
    urls = _urls("p", 3)
    site = FakeSite()
    pipeline = _pipeline(make, site)
    pipeline.deliveries[urls[1]] = Delivery(Verdict.POISON, 4, earlier=True)

    await pipeline.execute(pipeline.run(_request("poisoned", urls)))

    results = {r.url: r for r in _assert_exact(pipeline, "poisoned", urls, EventType.COMPLETED)}
    poisoned = results[urls[1]]
    assert poisoned.error is not None
    assert poisoned.error.code == ErrorCode.POISON
    assert "delivered 4 times" in poisoned.error.message
    assert site.hits[urls[1]] == 0
    assert results[urls[0]].ok
    assert results[urls[2]].ok


async def test_each_host_s_last_page_says_no_more_pages_of_the_run_follow(make):
    """A list request over two hosts, one of them beyond the dispatch window: the last task
    of each host is flagged `last` (so each fetcher hands the run's browser context back
    as soon as that page ends), and no other task is; before, only the run's one final
    task was, and the fetchers of its other hosts kept the context 5 s."""
    pipeline = _pipeline(make, FakeSite())
    window = pipeline.settings.dispatch_window
    site_urls = _urls("p", window + 3)
    other_urls = _urls("q", 2, site=OTHER)

    await pipeline.execute(pipeline.run(_request("r", site_urls + other_urls)))

    flagged = sorted(task.url for task in pipeline.tasks if task.last)
    assert flagged == sorted([site_urls[-1], other_urls[-1]])
    assert len(pipeline.tasks) == len(site_urls) + len(other_urls)


async def test_a_stopped_deep_crawl_admits_no_links_of_pages_answered_after_the_stop(make):
    """A deep crawl stops (its cancel reached the run) while five pages are at a fetcher that
    has not read the cancel yet; they answer `ok`, with links. The run waits for them and
    ends `cancelled` with a result for every page it counts: their links are not admitted
    (before, they were, so `total` counted pages that never got a result: 31 against 27
    results on a slow machine)."""
    seed = f"{SITE}/"
    middle = [f"{SITE}/a/{i}" for i in range(5)]
    pages = {seed: _linked(seed, *(f"/a/{i}" for i in range(5)))}
    for i, url in enumerate(middle):
        pages[url] = _linked(url, *(f"/a/{i}/{j}" for j in range(3)))
    pipeline = _pipeline(make, FakeSite(pages))  # type: ignore[arg-type]
    pipeline.holding = lambda task: task.url != seed
    request = CrawlRequest(
        request_id="stopped",
        urls=[seed],
        options=CrawlOptions(render="http"),
        crawl=CrawlSpec(max_pages=50, max_depth=2),
    )
    run = pipeline.run(request)
    task = asyncio.create_task(pipeline.execute(run))
    await until(lambda: len(pipeline.held) == len(middle))

    run.cancel(Cancel(request_id="stopped", reason="enough", at=utc_now()))
    pipeline.release()
    await task

    _assert_exact(pipeline, "stopped", [seed, *middle], EventType.CANCELLED)
    assert all(r.ok for r in _results(pipeline, "stopped"))
