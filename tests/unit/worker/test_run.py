"""One request's run on in-memory fakes: cancels, the request's deadline, final HTTP answers,
robots.txt and a small request beside a big one, with the real scheduler, renderer (HTTP
path), robots cache and outbox. The end-to-end versions of what needs real infrastructure
(Chromium pages closed on a cancel, a cancel read from the control topic, retries seen by the
browser) are in tests/integration."""

from __future__ import annotations

import asyncio
from collections import Counter

from _routes import ROBOTS_TXT
from inmemory import FakeControl, FakeRobotsSource, FakeSite, InMemoryPublisher, answer, worker_deps
from structlog.testing import capture_logs
from waiting import until

from service.contracts import CrawlOptions, CrawlRequest, ErrorCode, EventType, RecordSource
from service.http.robots import RobotsFile
from service.worker.run import RequestRun

SITE = "http://site.test"

SOURCE = RecordSource(topic="requests", partition=0, offset=0)

RUN_DEADLINE_S = 5.0
"""A run on in-memory fakes takes milliseconds; one that takes this long is stuck."""


def _request(request_id: str, urls: list[str], **options: object) -> CrawlRequest:
    return CrawlRequest(
        request_id=request_id, urls=urls, options=CrawlOptions(render="http", **options)
    )


def _urls(prefix: str, count: int) -> list[str]:
    return [f"{SITE}/{prefix}/{i}" for i in range(count)]


async def _execute(run: RequestRun) -> None:
    async with asyncio.timeout(RUN_DEADLINE_S):
        await run.execute()


def _assert_exact(publisher: InMemoryPublisher, settings, request_id, urls, kind) -> list:
    """One terminal of `kind`; every URL has exactly one result in that run; the counts are
    those of the results; nothing of the run comes after its terminal event."""
    seen = publisher.collected(settings)
    [terminal] = seen.terminal(request_id)
    assert terminal.type == kind, terminal
    results = [r for r in seen.results_of(request_id) if r.run_id == terminal.run_id]
    assert Counter(r.url for r in results) == Counter(urls)
    codes = Counter(r.error.code for r in results if r.error is not None)
    assert terminal.succeeded == sum(r.ok for r in results)
    assert terminal.cancelled == codes[ErrorCode.CANCELLED]
    assert terminal.failed == len(results) - terminal.succeeded - terminal.cancelled
    run = [e for e in seen.events_of(request_id) if e.run_id == terminal.run_id]
    assert run[0].type == EventType.ACCEPTED
    assert run[-1] is terminal
    assert [e.seq for e in run] == list(range(len(run)))
    return results


def _results(deps, request_id: str) -> list:
    return deps.publisher.collected(deps.settings).results_of(request_id)


async def test_cancel_stops_a_running_request_and_closes_its_pages():
    """A 30-URL request cancelled after its 3rd result (the other pages hang): the run ends
    `cancelled` with the reason, every URL has exactly one result, no page event follows the
    terminal, every page still running was closed and no page slot stays taken."""
    urls = _urls("quick", 3) + _urls("hang", 27)
    site = FakeSite(hanging="/hang/")
    deps = worker_deps(site)
    run = RequestRun(deps, _request("c30", urls), source=SOURCE)
    task = asyncio.create_task(_execute(run))
    await until(lambda: len(_results(deps, "c30")) >= 3)

    run.cancel(FakeControl().cancel("c30", "user asked"))
    await task

    results = _assert_exact(deps.publisher, deps.settings, "c30", urls, EventType.CANCELLED)
    [terminal] = deps.publisher.collected(deps.settings).terminal("c30")
    assert terminal.detail == "cancelled: user asked"
    assert terminal.succeeded >= 3
    assert terminal.cancelled > 0
    assert all(r.ok or r.error.code == ErrorCode.CANCELLED for r in results)
    started_hanging = [url for url in site.hits if "/hang/" in url]
    assert started_hanging
    assert sorted(site.closed) == sorted(started_hanging)
    assert (deps.scheduler.in_flight, deps.scheduler.backlog) == (0, 0)


async def test_a_request_cancelled_before_it_runs_renders_nothing():
    """A cancel already read from the control topic: the request ends `cancelled` with an
    `accepted`, a `cancelled` result per URL, and no page fetched."""
    control = FakeControl()
    control.cancel("early", "changed my mind")
    site = FakeSite()
    deps = worker_deps(site, control=control)
    urls = _urls("early", 5)

    await _execute(RequestRun(deps, _request("early", urls), source=SOURCE))

    results = _assert_exact(deps.publisher, deps.settings, "early", urls, EventType.CANCELLED)
    assert all(r.error.code == ErrorCode.CANCELLED for r in results)
    [terminal] = deps.publisher.collected(deps.settings).terminal("early")
    assert terminal.detail == "cancelled: changed my mind"
    assert site.hits == Counter()


async def test_deadline_ends_the_request_expired_with_exact_counts():
    """`deadline_ms` on 20 pages of which 15 hang: the run ends `expired` within its budget;
    pages that did not finish get `deadline` results; counts are exact."""
    budget_ms = 300  # the request's own option, short because the hanging pages never end
    urls = _urls("quick", 5) + _urls("hang", 15)
    site = FakeSite(hanging="/hang/")
    deps = worker_deps(site)
    loop = asyncio.get_running_loop()
    started = loop.time()

    await _execute(RequestRun(deps, _request("dl", urls, deadline_ms=budget_ms), source=SOURCE))

    assert loop.time() - started < budget_ms / 1000 + 1.0
    results = _assert_exact(deps.publisher, deps.settings, "dl", urls, EventType.EXPIRED)
    [terminal] = deps.publisher.collected(deps.settings).terminal("dl")
    assert terminal.detail is not None
    assert terminal.detail.startswith("deadline")
    assert terminal.cancelled == 0
    assert terminal.failed > 0
    assert all(r.ok or r.error.code == ErrorCode.DEADLINE for r in results)
    assert (deps.scheduler.in_flight, deps.scheduler.backlog) == (0, 0)


async def test_not_found_is_not_retried_but_service_unavailable_is():
    """A 404 is a final answer: one fetch, `http_error` 404, no retry. A 503 on the same run
    (the contrast that shows retries would be seen) is tried `page_retries` more times."""
    missing, busy = f"{SITE}/status/404", f"{SITE}/status/503"
    site = FakeSite(
        {
            missing: answer(missing, "<html><body>gone</body></html>", status=404),
            busy: answer(busy, "<html><body>busy</body></html>", status=503, retry_after="0"),
        }
    )
    deps = worker_deps(site)
    with capture_logs() as logs:
        await _execute(RequestRun(deps, _request("r-404", [missing, busy]), source=SOURCE))

    results = _assert_exact(
        deps.publisher, deps.settings, "r-404", [missing, busy], EventType.COMPLETED
    )
    by_url = {r.url: r for r in results}
    assert by_url[missing].error is not None
    assert (by_url[missing].error.code.value, by_url[missing].status_code) == ("http_error", 404)
    assert site.hits[missing] == 1
    retried = [e["url"] for e in logs if e["event"] == "page.retrying"]
    assert missing not in retried
    assert retried == [busy] * deps.settings.page_retries
    assert site.hits[busy] == deps.settings.page_retries + 1


async def test_robots_txt_is_respected_when_asked():
    """With `respect_robots`, a disallowed URL gets `robots` without being fetched, an allowed
    one is crawled, and robots.txt is fetched once; without it, the private page is crawled."""
    site = FakeSite()
    robots = FakeRobotsSource({f"{SITE}/robots.txt": RobotsFile(status=200, text=ROBOTS_TXT)})
    deps = worker_deps(site, robots=robots)
    private, allowed = f"{SITE}/private/a", f"{SITE}/page/1"
    ignored = f"{SITE}/private/a-x"

    await _execute(
        RequestRun(
            deps, _request("r-robots", [private, allowed], respect_robots=True), source=SOURCE
        )
    )
    await _execute(RequestRun(deps, _request("r-ignore", [ignored]), source=SOURCE))

    results = {
        r.url: r
        for r in _assert_exact(
            deps.publisher, deps.settings, "r-robots", [private, allowed], EventType.COMPLETED
        )
    }
    refused, crawled = results[private], results[allowed]
    assert refused.error is not None
    assert (refused.ok, refused.error.code.value) == (False, "robots")
    assert site.hits[private] == 0
    assert (crawled.ok, crawled.status_code) == (True, 200)
    assert robots.fetched == [f"{SITE}/robots.txt"]
    [ignored_result] = _assert_exact(
        deps.publisher, deps.settings, "r-ignore", [ignored], EventType.COMPLETED
    )
    assert (ignored_result.ok, ignored_result.status_code) == (True, 200)
    assert site.hits[ignored] == 1


async def test_small_request_finishes_while_a_big_request_of_hanging_pages_runs():
    """With default limits, a 1-URL request taken right after a 100-URL request of hanging
    pages completes while the big one is still running: the big request's queued pages do
    not keep the small one from a slot."""
    site = FakeSite(hanging="/hang/")
    deps = worker_deps(site)
    # The big request's pages time out after 1 s (the least a page attempt gets) rather than
    # the integration test's 3 s: how long they hang does not change who gets the next slot.
    hanging = _request("big", _urls("hang", 100), timeout_ms=1000)
    big = RequestRun(deps, hanging, source=SOURCE, priority=0)
    big_task = asyncio.create_task(big.execute())
    await until(site.started.is_set)
    assert deps.scheduler.backlog > 0  # the big request's pages wait for slots

    small = RequestRun(deps, _request("small", [f"{SITE}/page/1"]), source=SOURCE, priority=1)
    await _execute(small)

    seen = deps.publisher.collected(deps.settings)
    [terminal] = seen.terminal("small")
    assert (terminal.type, terminal.succeeded) == (EventType.COMPLETED, 1)
    assert seen.terminal("big") == []
    assert not big_task.done()
    big_task.cancel()
    await asyncio.gather(big_task, return_exceptions=True)
