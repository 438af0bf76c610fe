"""Deep crawl end to end on the generated link graph: the result URLs of a crawl equal those
of the reference BFS (`reference_crawl`), budgets are exact, a killed owner loses nothing.

Real broker, real Chromium, the generated site (`graph_site`, or a slow copy of it where a
test needs pages in flight long enough to kill or cancel a worker). Tests that neither kill
nor count the workers of their group share one worker (`run`) and tell their jobs apart by
request id; the others start their own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import sys
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

import pytest
from graphsite import serve_graph
from harness import produce, read_topic
from reference_crawl import reference_crawl

from service.client import CrawlClient
from service.contracts import (
    CrawlOptions,
    CrawlRequest,
    CrawlSpec,
    ErrorCode,
    EventType,
    dump,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from conftest import SharedRun
    from graphsite import GraphSite
    from testsite import TestSite

pytestmark = pytest.mark.integration

DEADLINE_S = 420.0
"""Wait for a batch of crawls to end (hundreds of pages on 2 cores)."""


def _allow(*sites) -> dict[str, str]:
    return {"CRAWL_ALLOWED_HOSTS": ",".join(f"127.0.0.1:{site.port}" for site in sites)}


@pytest.fixture(scope="module")
async def slow_site() -> AsyncIterator[GraphSite]:
    """A slow copy of the graph (300 ms a page), for the cancelled crawl."""
    async with serve_graph(delay_ms=300) as running:
        yield running


@pytest.fixture
async def run(
    shared_worker_with: Callable[..., Awaitable[SharedRun]],
    graph_site: GraphSite,
    site: TestSite,
    slow_site: GraphSite,
    other_site: TestSite,
) -> SharedRun:
    """The module's shared worker, on topics and a group of its own, with every site of the
    module allowlisted (no test here needs one of them left out: the graph's off-site links
    and its redirect target are none of them)."""
    hosts = _allow(graph_site, site, slow_site)["CRAWL_ALLOWED_HOSTS"]
    return await shared_worker_with(CRAWL_ALLOWED_HOSTS=f"{hosts},127.0.0.2:{other_site.port}")


def _request(
    request_id: str, seeds: list[str], options: CrawlOptions | None = None, **crawl: object
) -> tuple[bytes, bytes]:
    request = CrawlRequest(
        request_id=request_id,
        urls=seeds,
        crawl=CrawlSpec(**crawl),
        options=options or CrawlOptions(),
    )
    return request_id.encode(), dump(request)


def _reference(site, seeds: list[str], **crawl: object):
    fields = dict(crawl)
    max_depth = int(fields.pop("max_depth", 1))  # type: ignore[call-overload]
    return reference_crawl(site, seeds, max_depth=max_depth, **fields)  # type: ignore[arg-type]


def _final(collector, request_id: str):
    """The terminal event of the job's last run, and every result of the job."""
    terminals = collector.seen.terminal(request_id)
    return terminals[-1], collector.seen.results_of(request_id)


def _ended(seen, request_ids) -> bool:
    """Every job has its terminal event, and as many results of that run as it counts."""
    for rid in request_ids:
        terminals = seen.terminal(rid)
        if not terminals:
            return False
        last = terminals[-1]
        done = {r.url for r in seen.results_of(rid)}
        if len(done) < last.succeeded + last.failed + last.cancelled:
            return False
    return True


BROWSER_PATH = frozenset({"home-depth1", "home-depth4-budget"})
"""Combinations crawled in the browser; the rest take `render: http`. The fold (admission
order, dedupe, depth, parents, budget, counts) is the coordinator's whichever path renders,
and browser pages are what a CPU-bound run pays for: two combinations keep the browser's
link reading (the link only a script inserts is followed there, and not on the HTTP path,
where the reference reads the document as served) and its blocked redirect."""

COMBINATIONS = {
    "home-depth1": ({"max_depth": 1, "max_pages": 300}, "/"),
    "home-depth4-budget": ({"max_depth": 4, "max_pages": 40}, "/"),
    "home-whole-site": ({"max_depth": 5, "max_pages": 300}, "/"),
    "home-depth2-sitemap": ({"max_depth": 2, "max_pages": 60, "sitemap": True}, "/"),
    "docs-prefix": ({"max_depth": 6, "max_pages": 100, "scope": "prefix"}, "/docs/"),
    "home-include-exclude": (
        {"max_depth": 2, "max_pages": 300, "include": [r"/p/\d+"], "exclude": [r"/p/\d*[05]$"]},
        "/",
    ),
    "home-query-nofollow": (
        {"max_depth": 2, "max_pages": 300, "ignore_query": True, "respect_nofollow": False},
        "/",
    ),
}


@pytest.mark.long_running
async def test_result_urls_equal_the_reference_bfs(run, graph_site):
    """Several (depth, max_pages, scope, include/exclude, sitemap, query, nofollow) crawls of
    the graph (cycles, fragments, query variants, off-site and private links, a nofollow
    link, a link only a script inserts, a calendar trap, sitemap-only pages): each job's
    result URLs are exactly the reference's, each once, with the reference's depth and
    parent, and exact counts on `completed`; most take the HTTP path,
    the others (`BROWSER_PATH`) the browser's."""
    topics, collector = run.topics, run.collector
    expected = {}
    messages = []
    for name, (crawl, seed_path) in COMBINATIONS.items():
        seeds = [graph_site.url(seed_path)]
        http = name not in BROWSER_PATH
        expected[name] = _reference(graph_site, seeds, scripts=not http, **crawl)
        options = CrawlOptions(render="http") if http else None
        messages.append(_request(name, seeds, options, **crawl))
    await produce(topics, messages)
    await collector.wait_until(lambda seen: _ended(seen, expected), deadline_s=DEADLINE_S)

    for name, admitted in expected.items():
        terminal, results = _final(collector, name)
        assert terminal.type == EventType.COMPLETED, (name, terminal)
        urls = Counter(result.url for result in results)
        assert set(urls) == {page.url for page in admitted}, name
        assert max(urls.values()) == 1, (name, urls.most_common(3))
        placed = {page.url: (page.depth, page.parent_url) for page in admitted}
        assert {r.url: (r.depth, r.parent_url) for r in results} == placed, name
        assert terminal.total == len(admitted)
        assert terminal.succeeded + terminal.failed == len(admitted)
        assert terminal.succeeded == sum(r.ok for r in results)
        assert terminal.discovered is not None
        assert terminal.discovered >= len(admitted)
    # the calendar trap and the budget: cut at 40, the budget is named as the reason
    budget, _ = _final(collector, "home-depth4-budget")
    assert budget.total == 40
    assert budget.detail is not None
    assert budget.detail.startswith("budget spent")
    # in scope, a redirect to a private address gets `blocked`; the private host is off-site
    private = graph_site.url("/go/private")
    [blocked] = [r for r in collector.seen.results_of("home-depth1") if r.url == private]
    assert blocked.error is not None
    assert blocked.error.code == ErrorCode.BLOCKED
    # the link only a script inserts was followed in the browser, not on the HTTP path; the
    # nofollow-only page was not (by default)
    assert graph_site.url("/js-only") in {
        r.url for r in collector.seen.results_of("home-depth4-budget")
    }
    reached = {r.url for r in collector.seen.results_of("home-whole-site")}
    assert graph_site.url("/js-only") not in reached
    assert graph_site.url("/nofollow-only") not in reached
    orphans = {r.url for r in collector.seen.results_of("home-depth2-sitemap")}
    assert graph_site.url("/orphan/0") in orphans
    # page events count what is known: `discovered` never falls, `total` only grows
    events = [e for e in collector.seen.events_of("home-whole-site") if e.discovered is not None]
    assert len(events) > len(expected["home-whole-site"]) + 1  # as strict as `> 300` of 299
    for earlier, later in itertools.pairwise(events):
        assert later.discovered >= earlier.discovered
        assert later.total >= earlier.total


@pytest.mark.long_running
async def test_max_pages_is_never_exceeded_on_the_trap(run, graph_site):
    """50 crawls of the infinite calendar with random budgets: exactly `max_pages` distinct
    result URLs every time (the reachable set is infinite), the reference's set. On the HTTP
    path: the budget is the coordinator's fold, whichever path rendered the pages (the
    browser path's deep crawls are the tests above and below), and 325 browser pages took
    68 s of the suite."""
    topics, collector = run.topics, run.collector
    rng = random.Random(11)
    budgets = {f"trap-{i}": rng.randint(1, 12) for i in range(50)}
    seed = [graph_site.url("/calendar?month=0")]
    http = CrawlOptions(render="http")
    await produce(
        topics,
        [_request(rid, seed, http, max_depth=100, max_pages=n) for rid, n in budgets.items()],
    )
    await collector.wait_until(lambda seen: _ended(seen, budgets), deadline_s=DEADLINE_S)

    for rid, budget in budgets.items():
        terminal, results = _final(collector, rid)
        urls = {result.url for result in results}
        assert len(urls) == budget, (rid, budget, len(urls))
        assert urls == {
            p.url for p in _reference(graph_site, seed, max_depth=100, max_pages=budget)
        }
        assert terminal.type == EventType.COMPLETED
        assert terminal.total == budget


@pytest.mark.long_running
async def test_a_killed_owner_loses_nothing(topics, collector, start_worker):
    """Two workers; the job's owner is killed with SIGKILL mid-crawl; the other finishes it
    with the result set of an uninterrupted crawl, no result_id names two URLs, and the
    final run's counts cover the whole job."""
    async with serve_graph(delay_ms=150) as slow:
        env = _allow(slow)
        workers = {name: await start_worker(name, CRAWL_WORKER_NAME=name, **env) for name in "ab"}
        seeds = [slow.url("/")]
        crawl = {"max_depth": 2, "max_pages": 80}
        expected = {page.url for page in _reference(slow, seeds, **crawl)}
        await produce(topics, [_request("killed", seeds, **crawl)])
        await collector.wait_until(
            lambda seen: len(seen.results_of("killed")) >= 25, deadline_s=DEADLINE_S
        )
        owner = collector.seen.events_of("killed")[0].worker  # its coordinator sends events
        await workers[owner].kill()
        await collector.wait_until(lambda seen: _ended(seen, ["killed"]), deadline_s=DEADLINE_S)

    terminal, results = _final(collector, "killed")
    assert terminal.type == EventType.COMPLETED
    assert terminal.worker != owner
    assert {r.url for r in results} == expected
    names = defaultdict(set)
    for result in results:
        names[result.result_id].add(result.url)
    assert all(len(urls) == 1 for urls in names.values())
    assert (terminal.total, terminal.succeeded + terminal.failed) == (len(expected),) * 2
    survivor = next(w for name, w in workers.items() if name != owner)
    resumed = [e for e in survivor.events() if e.get("event") == "crawl.resumed"]
    assert resumed
    assert resumed[0]["pages"] > 0  # pages the dead owner finished were not rendered again


async def test_a_deep_crawl_can_be_cancelled(run, slow_site):
    """A cancel stops a deep crawl: every admitted page has one result, `cancelled` ends it."""
    topics, collector, slow = run.topics, run.collector, slow_site
    await produce(topics, [_request("stop-me", [slow.url("/")], max_depth=3, max_pages=200)])
    await collector.wait_until(
        lambda seen: len(seen.results_of("stop-me")) >= 5, deadline_s=DEADLINE_S
    )
    async with CrawlClient(topics.settings()) as client:
        await client.cancel("stop-me", "enough")
    await collector.wait_until(lambda seen: _ended(seen, ["stop-me"]), deadline_s=DEADLINE_S)
    terminal, results = _final(collector, "stop-me")
    assert terminal.type == EventType.CANCELLED
    urls = Counter(r.url for r in results)
    assert max(urls.values()) == 1
    assert len(urls) == terminal.total < 200
    assert terminal.cancelled == sum(
        1 for r in results if r.error is not None and r.error.code == ErrorCode.CANCELLED
    )


@pytest.mark.parametrize(
    ("request_id", "crawl", "message"),
    [
        ("bad-crawl-include", {"max_pages": 5, "include": ["(unclosed"]}, "include"),
        ("bad-crawl-budget", {"max_pages": 20_000}, "at most 10000 pages"),
    ],
)
async def test_a_bad_crawl_is_rejected_with_a_reason(run, request_id, crawl, message):
    topics, collector = run.topics, run.collector
    request = {"request_id": request_id, "urls": ["http://127.0.0.1/"], "crawl": crawl}
    await produce(topics, [(request_id.encode(), json.dumps(request).encode())])
    await collector.wait_until(lambda seen: seen.terminal(request_id), deadline_s=120)
    [terminal] = collector.seen.terminal(request_id)
    assert terminal.type == EventType.REJECTED
    assert terminal.detail is not None
    assert "invalid_request" in terminal.detail
    assert message in terminal.detail
    # the dead-letter topic is the module's: this request's letter, among the others
    key = request_id.encode()
    [letter] = await read_topic(topics.bootstrap, topics.dead_letter, 1, 60, key=key)
    assert letter.key == key


async def test_submit_follow_shows_the_deep_crawl(run, graph_site):
    """`crawlstream submit URL --depth 1 --max-pages 20 --follow` prints the live counts
    (discovered, ok, failed) and a table with each page's depth."""
    topics = run.topics  # the CLI names its request with a fresh uuid
    admitted = _reference(graph_site, [graph_site.url("/")], max_depth=1, max_pages=20)
    ok = sum(graph_site.status_of(page.url) == 200 for page in admitted)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        "submit",
        graph_site.url("/"),
        "--depth",
        "1",
        "--max-pages",
        "20",
        "--follow",
        env=os.environ | topics.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), DEADLINE_S)
    text = output.decode()
    assert process.returncode == 0, text
    assert "discovered" in text
    assert f"completed: {ok} succeeded, {len(admitted) - ok} failed" in text, text
    assert "depth" in text


async def test_a_sitemap_of_50000_urls_completes_within_the_budget(run, site):
    """`sitemap: true` on a site whose sitemap lists 50,000 pages (the protocol's maximum;
    before, the sitemap went to the log as one 1.6 MB record: `publish_failed`, `failed`):
    the budgeted pages are all ok, the crawl ends `completed` with the budget as the reason
    and every listed page counted as discovered."""
    topics, collector = run.topics, run.collector
    seeds = [site.url("/page/0")]
    crawl = {"max_depth": 0, "max_pages": 12, "sitemap": True}
    await produce(topics, [_request("big-sitemap", seeds, **crawl)])
    await collector.wait_until(lambda seen: _ended(seen, ["big-sitemap"]), deadline_s=DEADLINE_S)

    terminal, results = _final(collector, "big-sitemap")
    assert terminal.type == EventType.COMPLETED, terminal
    assert {r.url for r in results} == {site.url(f"/page/{n}") for n in range(12)}
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    assert (terminal.total, terminal.succeeded) == (12, 12)
    assert terminal.discovered == 50_000
    assert terminal.detail is not None
    assert terminal.detail.startswith("budget spent")


async def test_a_split_sitemap_record_is_replayed_by_the_next_owner(
    topics, collector, site, start_worker
):
    """The owner logs a sitemap record too large for one message (as chunks), then is
    killed; the next owner replays it whole (`crawl.resumed` with the sitemap) and the job
    keeps its exact budget: cancelled at once, it has exactly `max_pages` results, each
    once, the seed and the sitemap's first pages."""
    # A 2,000-page budget of the test site's short URLs is a 66 kB sitemap record; a
    # message limit of 50 kB makes it two chunks (a site with 1 kB URLs does that at the
    # default 1 MB).
    env = {"CRAWL_MAX_MESSAGE_BYTES": "50000"}
    workers = {name: await start_worker(name, CRAWL_WORKER_NAME=name, **env) for name in "ab"}
    seeds = [site.url("/page/0")]
    crawl = {"max_depth": 0, "max_pages": 2_000, "sitemap": True}
    await produce(topics, [_request("split-sitemap", seeds, **crawl)])

    def sitemap_pages_done(seen) -> bool:
        return sum(r.url != seeds[0] for r in seen.results_of("split-sitemap")) >= 2

    await collector.wait_until(sitemap_pages_done, deadline_s=DEADLINE_S)
    owner = collector.seen.events_of("split-sitemap")[0].worker  # the coordinator, not a fetcher
    await workers[owner].kill()
    survivor = next(w for name, w in workers.items() if name != owner)
    resumed = await survivor.wait_for_log("crawl.resumed", deadline_s=DEADLINE_S)
    assert resumed["sitemap"] is True
    async with CrawlClient(topics.settings()) as client:
        await client.cancel("split-sitemap", "enough")
    await collector.wait_until(lambda seen: _ended(seen, ["split-sitemap"]), deadline_s=DEADLINE_S)

    terminal, results = _final(collector, "split-sitemap")
    assert terminal.type == EventType.CANCELLED
    assert terminal.worker != owner
    assert terminal.total == 2_000
    assert terminal.succeeded + terminal.failed + terminal.cancelled == 2_000
    assert {r.url for r in results} == {site.url(f"/page/{n}") for n in range(2_000)}


PACED_DEADLINE_S = 120.0
"""Wait for the 1-URL requests beside a paced deep crawl (each takes well under a second
alone; before, none finished while the crawl ran: it would have run for half an hour)."""


async def test_a_paced_deep_crawl_does_not_keep_other_requests_waiting(run, graph_site, other_site):
    """A deep crawl with `delay_ms: 1000` and `max_pages: 2000` runs; 1-URL requests to
    another host (127.0.0.2), produced once the crawl has admitted 60 pages, all complete
    while it is still running (before, its pages waiting for the delay filled the backlog
    and paused intake for every partition until the crawl ended)."""
    topics, collector, other = run.topics, run.collector, other_site
    crawl = {"max_depth": 10, "max_pages": 2_000, "delay_ms": 1_000}
    await produce(topics, [_request("paced", [graph_site.url("/")], **crawl)])
    await collector.wait_until(
        lambda seen: any(e.total >= 60 for e in seen.events_of("paced")),
        deadline_s=DEADLINE_S,
    )
    singles = [f"single-{n}" for n in range(8)]  # spread over the 4 partitions
    await produce(
        topics,
        [
            (rid.encode(), dump(CrawlRequest(request_id=rid, urls=[other.url(f"/page/{n}")])))
            for n, rid in enumerate(singles)
        ],
    )
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in singles), deadline_s=PACED_DEADLINE_S
    )
    assert not collector.seen.terminal("paced")  # still crawling
    for rid in singles:
        [terminal] = collector.seen.terminal(rid)
        assert terminal.type == EventType.COMPLETED
        assert terminal.succeeded == 1
    async with CrawlClient(topics.settings()) as client:
        await client.cancel("paced", "enough")
    await collector.wait_until(lambda seen: _ended(seen, ["paced"]), deadline_s=DEADLINE_S)
    [terminal] = collector.seen.terminal("paced")
    assert terminal.type == EventType.CANCELLED
    assert terminal.total < 2_000
