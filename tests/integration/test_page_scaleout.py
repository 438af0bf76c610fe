"""Scale-out by the page (issue 20): a request's pages spread over the fetchers by host, and
politeness holds however many workers run.

Real broker, real Chromium, test sites on several loopback addresses (127.0.0.2 ...) that
stand for several hosts; default settings (4 page partitions in tests, as 4 request
partitions). Each test failed on the request-per-replica main: one host saw 12 pages at
once under 3 workers, a 48-URL request came from one worker only, roles did not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, defaultdict

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from graphsite import serve_graph
from harness import Topics, WorkerProcess, produce, wait_for_group
from reference_crawl import reference_crawl
from testsite import serve

from service.client import CrawlClient
from service.contracts import CrawlOptions, CrawlRequest, CrawlSpec, ErrorCode, EventType, dump

pytestmark = pytest.mark.integration

DEADLINE_S = 240.0
"""Wait for a batch of requests to end (a kill -9 adds two session timeouts, 30 s each)."""

HOSTS = [f"127.0.0.{n}" for n in range(2, 14)]
"""Twelve hosts whose keys hash to all four page partitions of the tests' topics."""


def _request(request_id: str, urls: list[str], **crawl: object) -> tuple[bytes, bytes]:
    spec = CrawlSpec(**crawl) if crawl else None
    request = CrawlRequest(
        request_id=request_id, urls=urls, options=CrawlOptions(render="http"), crawl=spec
    )
    return request_id.encode(), dump(request)


def _completed(seen, request_ids) -> bool:
    """Every request has a terminal event of a run whose results have all arrived."""
    for rid in request_ids:
        terminals = seen.terminal(rid)
        if not terminals:
            return False
        last = terminals[-1]
        urls = {r.url for r in seen.results_of(rid)}
        if len(urls) < last.total:
            return False
    return True


@contextlib.asynccontextmanager
async def _hosts(count: int = len(HOSTS)):
    """The test site on `count` loopback addresses; yields them with the allow-list."""
    async with contextlib.AsyncExitStack() as stack:
        sites = [await stack.enter_async_context(serve(host=host)) for host in HOSTS[:count]]
        allowed = ",".join(f"{host}:{site.port}" for host, site in zip(HOSTS, sites, strict=False))
        yield sites, {"CRAWL_ALLOWED_HOSTS": allowed}


async def test_three_workers_hold_the_per_host_limit_at_the_site(topics, collector, start_worker):
    """12 requests of 10 pages on one host under three workers: the site never sees more than
    CRAWL_MAX_PAGES_PER_HOST (4, the default) pages at once. Before, each worker applied the
    limit alone: 12 at once."""
    async with serve_graph(delay_ms=300) as slow:
        allow = {"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{slow.port}"}
        await asyncio.gather(
            *(start_worker(name, CRAWL_WORKER_NAME=name, **allow) for name in ("x", "y", "z"))
        )
        await wait_for_group(topics, members=3)
        requests = {
            f"polite-{i}": [slow.url(f"/p/{i * 10 + j}") for j in range(10)] for i in range(12)
        }
        await produce(topics, [_request(rid, urls) for rid, urls in requests.items()])
        await collector.wait_until(lambda seen: _completed(seen, requests), deadline_s=DEADLINE_S)
        coordinators = {collector.seen.terminal(rid)[-1].worker for rid in requests}
        assert 1 <= slow.max_in_flight <= 4
    assert len(coordinators) > 1  # the requests were run by more than one coordinator
    for rid, urls in requests.items():
        assert {r.url for r in collector.seen.results_of(rid)} == set(urls)


async def test_a_big_requests_pages_come_from_every_worker(topics, collector, start_worker):
    """One request of 48 URLs over 12 hosts: its pages are rendered by all three workers
    (one coordinator runs it; the fetchers own the hosts), each URL has one result."""
    async with _hosts() as (sites, allow):
        await asyncio.gather(
            *(start_worker(name, CRAWL_WORKER_NAME=name, **allow) for name in ("a", "b", "c"))
        )
        await wait_for_group(topics, members=3)  # both groups: each fetcher owns hosts
        urls = [site.url(f"/slow/big-{i}?ms=300") for i in range(4) for site in sites]
        await produce(topics, [_request("big", urls)])
        await collector.wait_until(lambda seen: _completed(seen, ["big"]), deadline_s=DEADLINE_S)
    [terminal] = collector.seen.terminal("big")
    assert terminal.type == EventType.COMPLETED
    assert (terminal.total, terminal.succeeded) == (48, 48)
    results = collector.seen.results_of("big")
    assert Counter(r.url for r in results) == Counter(urls)
    assert {r.worker for r in results} == {"a", "b", "c"}
    events = [e for e in collector.seen.events_of("big") if e.run_id == terminal.run_id]
    assert {e.worker for e in events} == {terminal.worker}  # one coordinator sends them all
    assert [e.seq for e in events] == list(range(len(events)))


@pytest.mark.long_running
async def test_killing_a_coordinator_and_a_fetcher_loses_nothing(topics, collector, start_worker):
    """Two coordinators and two fetchers (`CRAWL_ROLE`); mid-run one of each is killed with
    SIGKILL. Every request still completes with one result per URL (redelivered pages keep
    their result_id) and counts that cover every page."""
    async with _hosts(8) as (sites, allow):
        roles = {"c1": "coordinator", "c2": "coordinator", "f1": "fetcher", "f2": "fetcher"}
        started = await asyncio.gather(
            *(
                start_worker(name, CRAWL_WORKER_NAME=name, CRAWL_ROLE=role, **allow)
                for name, role in roles.items()
            )
        )
        workers = dict(zip(roles, started, strict=True))
        requests = {
            f"kill-{i}": [site.url(f"/slow/kill-{i}-{j}?ms=1000") for j, site in enumerate(sites)]
            for i in range(8)
        }
        await produce(topics, [_request(rid, urls) for rid, urls in requests.items()])
        await collector.wait_until(
            lambda seen: (
                {r.worker for r, _ in seen.results} >= {"f1", "f2"}
                and {e.worker for e, _ in seen.events} >= {"c1", "c2"}
            ),
            deadline_s=DEADLINE_S,
        )
        await workers["c1"].kill()
        await workers["f1"].kill()
        await collector.wait_until(lambda seen: _completed(seen, requests), deadline_s=DEADLINE_S)
    for rid, urls in requests.items():
        terminal = collector.seen.terminal(rid)[-1]
        assert terminal.type == EventType.COMPLETED, rid
        assert (terminal.total, terminal.succeeded) == (len(urls), len(urls)), rid
        names = defaultdict(set)
        for result in collector.seen.results_of(rid):
            names[result.url].add(result.result_id)
        assert sorted(names) == sorted(urls)
        assert all(len(ids) == 1 for ids in names.values())
    assert workers["c2"].process.returncode is None
    assert workers["f2"].process.returncode is None


async def test_a_cancel_reaches_a_page_on_another_worker(topics, site, collector, start_worker):
    """The coordinator and the fetcher are different processes: a cancel read from the
    control topic stops the page the fetcher is rendering (a 10-minute page), its result is
    `cancelled`, and the coordinator ends the run `cancelled`."""
    await start_worker("coord", CRAWL_WORKER_NAME="coord", CRAWL_ROLE="coordinator")
    await start_worker("fetch", CRAWL_WORKER_NAME="fetch", CRAWL_ROLE="fetcher")
    url = site.url("/slow/cancel-me?ms=600000")
    await produce(topics, [_request("cancel-me", [url])])
    await collector.wait_until(lambda _: site.hits["/slow/cancel-me"] > 0, deadline_s=DEADLINE_S)
    async with CrawlClient(topics.settings()) as client:
        await client.cancel("cancel-me", "not needed")
    await collector.wait_until(lambda seen: _completed(seen, ["cancel-me"]), deadline_s=DEADLINE_S)
    [terminal] = collector.seen.terminal("cancel-me")
    assert (terminal.type, terminal.worker, terminal.cancelled) == (EventType.CANCELLED, "coord", 1)
    [result] = collector.seen.results_of("cancel-me")
    assert (result.worker, result.error.code) == ("fetch", ErrorCode.CANCELLED)


async def test_a_deep_crawl_over_three_workers_returns_the_reference_set(
    topics, collector, start_worker
):
    """The coordinator folds links in admission order whichever fetcher renders a page: the
    result URLs equal the reference BFS's, the budget is exact; and at no instant are more
    than CRAWL_MAX_PAGES_PER_HOST (4, the default) of the job's pages in flight at the site
    (it records its concurrency; 100 ms a page keeps several in flight)."""
    async with serve_graph(delay_ms=100) as slow:
        allow = {"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{slow.port}"}
        await asyncio.gather(
            *(start_worker(name, CRAWL_WORKER_NAME=name, **allow) for name in ("d1", "d2", "d3"))
        )
        await wait_for_group(topics, members=3)
        seeds = [slow.url("/")]
        crawl = {"max_depth": 4, "max_pages": 120}
        expected = {p.url for p in reference_crawl(slow, seeds, scripts=False, **crawl)}
        # Over HTTP: what is shown is the fold across fetchers and the host limit, not the
        # render path (the reference BFS on the browser path is test_deep_crawl's).
        request = CrawlRequest(
            request_id="deep3",
            urls=seeds,
            crawl=CrawlSpec(**crawl),
            options=CrawlOptions(render="http"),
        )
        await produce(topics, [(b"deep3", dump(request))])
        await collector.wait_until(lambda seen: _completed(seen, ["deep3"]), deadline_s=DEADLINE_S)
        assert 1 <= slow.max_in_flight <= 4
    [terminal] = collector.seen.terminal("deep3")
    assert terminal.type == EventType.COMPLETED
    assert {r.url for r in collector.seen.results_of("deep3")} == expected
    assert terminal.total == len(expected) == 120


async def test_a_frontier_topic_not_copartitioned_is_refused_at_start(kafka, tmp_path):
    """A coordinator reads frontier partition p for requests partition p: a frontier topic
    with another partition count would lose page outcomes, so the worker does not start and
    says which counts differ and how to fix it."""
    topics = Topics(bootstrap=kafka)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topics.frontier, 2, 1)])  # requests will have 4
    finally:
        await admin.close()
    worker = WorkerProcess(topics.env(), tmp_path / "mismatch.log", "mismatch")
    try:
        with pytest.raises(AssertionError, match="exited"):
            await worker.start()
        assert await worker.process.wait() == 2
    finally:
        await worker.close()
    text = worker.log_path.read_text()
    assert f"topic {topics.frontier} has 2 partitions and {topics.requests} has 4" in text
    assert "must be equal" in text
