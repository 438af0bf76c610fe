"""The official `firecrawl-py` SDK against `crawlstream gateway`: real broker, workers,
Chromium and the local test site; the SDK pointed at the gateway with `api_url`. Every test
shares one worker (`run`, the graph site allowlisted beside the test site) and tells its jobs
apart by id; tests that neither kill nor stop a gateway, nor count every job of one, share
one replica in front of it (`shared_replica`), the others start their own on its topics."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import TYPE_CHECKING

import httpx
import pytest
from firecrawl import Firecrawl
from firecrawl.v2.types import PaginationConfig
from firecrawl.v2.utils.error_handler import FirecrawlError
from gateway import GatewayProcess, gateway_starter, running_gateway

from service.gateway.paging import PAGE_DOCUMENTS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from conftest import SharedRun
    from graphsite import GraphSite
    from testsite import TestSite

pytestmark = pytest.mark.integration

SDK_TIMEOUT_S = 120
"""The SDK's own waits (scrape, crawl waiter, batch waiter)."""


def sdk(gateway: GatewayProcess) -> Firecrawl:
    return Firecrawl(api_key="fc-test", api_url=gateway.url)


def _allowed(site: TestSite, graph_site: GraphSite) -> str:
    """Both sites of the module (no test here needs either left out)."""
    return f"127.0.0.1:{site.port},127.0.0.1:{graph_site.port}"


@pytest.fixture
async def run(
    shared_worker_with: Callable[..., Awaitable[SharedRun]],
    site: TestSite,
    graph_site: GraphSite,
) -> SharedRun:
    """The module's one worker, on topics and a group of its own, both sites allowlisted."""
    return await shared_worker_with(CRAWL_ALLOWED_HOSTS=_allowed(site, graph_site))


@pytest.fixture(scope="module")
async def shared_replica(
    shared_worker_with: Callable[..., Awaitable[SharedRun]],
    site: TestSite,
    graph_site: GraphSite,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[GatewayProcess]:
    """One gateway replica in front of `run`'s worker, with the default settings of a
    gateway on its topics (the test site allowlisted), for the tests that neither configure,
    kill nor stop it and tell their jobs apart by id."""
    shared = await shared_worker_with(CRAWL_ALLOWED_HOSTS=_allowed(site, graph_site))
    log = tmp_path_factory.mktemp("shared-replica") / "shared-replica.log"
    async with running_gateway(shared.topics.env(), log, "shared-replica") as gateway:
        yield gateway


@pytest.fixture
async def start_replica(
    run: SharedRun, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[GatewayProcess]]]:
    """Starts gateway replicas of this test's own on `run`'s topics; all stopped afterwards."""
    async with gateway_starter(run.topics.env, tmp_path) as start:
        yield start


async def test_scrape_returns_markdown_html_links_and_a_screenshot(
    shared_replica: GatewayProcess, site: TestSite
):
    """`scrape` with markdown, html, links and screenshot gets the page's document."""
    gateway = shared_replica
    doc = await asyncio.to_thread(
        sdk(gateway).scrape,
        site.url("/page/3"),
        formats=["markdown", "html", "links", "screenshot"],
        only_main_content=False,  # the title is in the page's <header>
        timeout=60_000,
    )
    assert "Page 3" in (doc.markdown or "")
    assert "<h1>Page 3</h1>" in (doc.html or "")
    assert site.url("/page/4") in (doc.links or [])
    assert (doc.screenshot or "").startswith("data:image/png;base64,")
    assert doc.metadata_typed.status_code == 200
    assert doc.metadata_typed.source_url == site.url("/page/3")
    assert doc.metadata_typed.title == "Page 3"
    main = await asyncio.to_thread(sdk(gateway).scrape, site.url("/page/3"), timeout=60_000)
    assert "Page 3" not in (main.markdown or "")  # Firecrawl's default: main content only
    assert main.markdown


async def test_an_option_the_cluster_cannot_honour_is_refused_naming_it(
    shared_replica: GatewayProcess, site: TestSite
):
    """`proxy: stealth` gets Firecrawl's 400 naming the option; nothing is produced."""
    gateway = shared_replica
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(sdk(gateway).scrape, site.url("/page/1"), proxy="stealth")
    assert raised.value.status_code == 400
    assert "proxy" in str(raised.value)


async def test_crawl_with_limit_and_include_paths_through_the_waiter(
    shared_replica: GatewayProcess, site: TestSite
):
    """`crawl` (start and wait) keeps to its limit and include paths."""
    gateway = shared_replica
    job = await asyncio.to_thread(
        sdk(gateway).crawl,
        site.url("/"),
        limit=12,
        include_paths=["^/page/"],
        poll_interval=1,
        timeout=SDK_TIMEOUT_S,
    )
    assert job.status == "completed"
    sources = [doc.metadata_typed.source_url or "" for doc in job.data]
    assert len(sources) == len(set(sources)) == 12
    assert site.url("/") in sources
    others = [url for url in sources if url != site.url("/")]
    assert all(url.startswith(site.url("/page/")) for url in others)
    assert job.completed == 12


CRAWLED = PAGE_DOCUMENTS + 5
"""More documents than one page of a crawl's status holds."""


async def test_two_replicas_start_poll_page_through_next_and_cancel(
    shared_replica: GatewayProcess, start_replica, site: TestSite
):
    """A crawl of more than 100 documents started through one replica is polled and paged
    (`next`) through the other, right after the start; then a second one is cancelled there."""
    first, second = shared_replica, await start_replica("g2")
    started = await asyncio.to_thread(
        sdk(first).start_crawl, site.url("/"), limit=CRAWLED, include_paths=["^/page/"]
    )
    early = await asyncio.to_thread(
        sdk(second).get_crawl_status, started.id, PaginationConfig(auto_paginate=False)
    )
    assert early.status == "scraping"
    job = await _wait_done(sdk(second), started.id)
    assert job.status == "completed"
    pages = await _pages(sdk(second), started.id)
    assert len(pages) == 2
    urls = [doc.metadata_typed.source_url for page in pages for doc in page.data]
    assert len(urls) == len(set(urls)) == CRAWLED == job.completed
    everything = await asyncio.to_thread(sdk(second).get_crawl_status, started.id)
    assert len(everything.data) == CRAWLED
    assert not await asyncio.to_thread(sdk(first).cancel_crawl, started.id)  # 409: it ended

    other = await asyncio.to_thread(
        sdk(first).start_crawl, site.url("/"), limit=400, include_paths=["^/page/"]
    )
    assert await asyncio.to_thread(sdk(second).cancel_crawl, other.id)
    cancelled = await _wait_done(sdk(first), other.id)
    assert cancelled.status == "cancelled"
    assert cancelled.completed < 400


async def test_batch_scrape_returns_one_document_per_url(
    shared_replica: GatewayProcess, site: TestSite
):
    """`batch_scrape` waits for the batch and returns every URL's document; a URL the egress
    policy refuses is listed by the errors endpoint instead."""
    gateway = shared_replica
    urls = [site.url(f"/page/{n}") for n in range(5)]
    refused = "http://127.0.0.1:9/closed"
    job = await asyncio.to_thread(
        sdk(gateway).batch_scrape,
        [*urls, refused],
        formats=["markdown"],
        poll_interval=1,
        wait_timeout=SDK_TIMEOUT_S,
    )
    assert job.status == "completed"
    assert sorted(doc.metadata_typed.source_url for doc in job.data) == sorted(urls)
    assert all("Page" in (doc.markdown or "") for doc in job.data)
    assert (job.completed, job.total) == (5, 6)
    alone = await asyncio.to_thread(sdk(gateway).start_batch_scrape, [refused])
    async with asyncio.timeout(60):
        while (
            await asyncio.to_thread(sdk(gateway).get_batch_scrape_status, alone.id)
        ).status == "scraping":
            await asyncio.sleep(0.5)
    errors = await asyncio.to_thread(sdk(gateway).get_batch_scrape_errors, alone.id)
    assert [(e.url, e.code) for e in errors.errors] == [(refused, "blocked")]


async def test_a_replica_started_mid_crawl_answers_for_it_at_once(start_replica, site: TestSite):
    """A crawl started through one replica, which then dies: a replica started afterwards
    rebuilds its view from the topics and answers for the job on its first poll."""
    first = await start_replica("g1")
    started = await asyncio.to_thread(
        sdk(first).start_crawl, site.url("/"), limit=40, include_paths=["^/page/"]
    )
    await first.kill()
    restarted = await start_replica("g2")
    polled = await asyncio.to_thread(
        sdk(restarted).get_crawl_status, started.id, PaginationConfig(auto_paginate=False)
    )
    assert polled.status in {"scraping", "completed"}
    job = await _wait_done(sdk(restarted), started.id)
    assert job.status == "completed"
    everything = await asyncio.to_thread(sdk(restarted).get_crawl_status, started.id)
    assert len({doc.metadata_typed.source_url for doc in everything.data}) == 40


async def test_map_lists_the_sitemap_and_the_seed_links_rendering_only_the_seed(
    shared_replica: GatewayProcess, graph_site: GraphSite
):
    """`map` answers the sitemap's URLs and the home page's links; no other page is fetched."""
    gateway = shared_replica  # the graph site is crawled by no other test of the module
    graph_site.reset_counters()
    home = graph_site.url("/")
    found = await asyncio.to_thread(sdk(gateway).map, home, ignore_query_parameters=False)
    urls = {link.url for link in found.links}
    assert set(graph_site.sitemap_urls()) <= urls
    followable = {
        link.target
        for link in graph_site.links_of(home)
        if not link.by_script and not link.nofollow
    }
    on_site = {url for url in followable if url.startswith(graph_site.base_url)}
    assert on_site - urls == set()
    pages = [key for key in graph_site.hits if "robots" not in key and "sitemap" not in key]
    assert set(pages) <= {"/", "/favicon.ico"}, pages


async def test_the_watcher_streams_every_document_over_the_websocket(
    shared_replica: GatewayProcess, site: TestSite
):
    """The SDK's watcher gets a `document` event per page over the WebSocket, then `done`."""
    gateway = shared_replica
    client = sdk(gateway)
    started = await asyncio.to_thread(
        client.start_crawl, site.url("/"), limit=15, include_paths=["^/page/"]
    )
    watcher = client.watcher(started.id, poll_interval=600, timeout=SDK_TIMEOUT_S)
    documents: list[dict] = []
    finished = threading.Event()
    watcher.add_event_listener("document", documents.append)
    watcher.add_event_listener("done", lambda _: finished.set())
    watcher.start()
    try:
        assert await asyncio.to_thread(finished.wait, SDK_TIMEOUT_S)
    finally:
        watcher.stop()
    urls = {event["data"]["metadata"]["sourceURL"] for event in documents}
    assert len(urls) == len(documents) == 15


async def test_bad_input_gets_firecrawls_400_and_starts_nothing(start_gateway):
    """Broken JSON, a body that is not an object, an unknown key, a bad cursor: 400 in
    Firecrawl's shape, and no job exists afterwards."""
    gateway = await start_gateway()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as client:
        broken = await client.post(
            "/v2/crawl", content=b'{"url": ', headers={"Content-Type": "application/json"}
        )
        listed = await client.post("/v2/crawl", json=["https://example.com/"])
        unknown = await client.post("/v2/crawl", json={"url": "https://e.com/", "depth": 2})
        cursor = await client.get(f"/v2/crawl/{uuid.uuid4()}?cursor=nope")
        active = await client.get("/v2/crawl/active")
    for answer in (broken, listed, unknown):
        assert answer.status_code == 400
        assert answer.json()["success"] is False
        assert answer.json()["error"].startswith("Bad Request")
    assert "depth" in unknown.json()["error"]
    assert cursor.status_code == 404  # the job is looked up before its cursor is read
    assert active.json() == {"success": True, "crawls": []}


async def test_an_unknown_job_is_404(shared_replica: GatewayProcess):
    """A poll of a job id nobody started is Firecrawl's 404."""
    gateway = shared_replica
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(
            sdk(gateway).get_crawl_status, "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"
        )
    assert raised.value.status_code == 404


async def test_sigterm_drains_and_the_gateway_exits_0(start_gateway):
    """SIGTERM (`docker stop`, a pod's termination) ends the gateway cleanly: exit code 0,
    as the worker and the dispatcher, not 143 from a re-raised signal."""
    gateway = await start_gateway()
    assert await gateway.terminate() == 0, gateway.log_path.read_text()[-3000:]


async def _wait_done(client: Firecrawl, job_id: str, deadline_s: float = 180):
    async with asyncio.timeout(deadline_s):
        while True:
            job = await asyncio.to_thread(
                client.get_crawl_status, job_id, PaginationConfig(auto_paginate=False)
            )
            if job.status != "scraping":
                return job
            await asyncio.sleep(1)


async def _pages(client: Firecrawl, job_id: str):
    first = await asyncio.to_thread(
        client.get_crawl_status, job_id, PaginationConfig(auto_paginate=False)
    )
    pages = [first]
    while pages[-1].next:
        pages.append(await asyncio.to_thread(client.get_crawl_status_page, pages[-1].next))
    return pages


async def test_a_second_scrape_is_a_cache_hit_and_max_age_zero_fetches(
    shared_replica: GatewayProcess, site: TestSite
):
    """Firecrawl's page cache through `firecrawl-py` as written: a second `scrape` of a URL is
    `cacheState: hit` with the first fetch's `cachedAt` (the site answers once); `maxAge=0`
    fetches again; `lockdown` and `minAge` on a URL never fetched are Firecrawl's 404s and
    never reach the site, while `minAge` on a cached one answers from the cache."""
    gateway = shared_replica
    client = sdk(gateway)
    tag = uuid.uuid4().hex[:8]
    url, never = site.url(f"/cache/plain/{tag}"), site.url(f"/cache/plain/{tag}-never")

    def answers(of: str) -> int:
        return site.cache_answers[f"{of.removeprefix(site.base_url)} 200"]

    def scrape(target: str, **options: object):
        return client.scrape(target, formats=["markdown"], timeout=60_000, **options)

    first = await asyncio.to_thread(scrape, url)
    second = await asyncio.to_thread(scrape, url)
    assert first.metadata_typed.cache_state == "miss"
    assert second.metadata_typed.cache_state == "hit"
    assert second.metadata_typed.cached_at == first.metadata_typed.cached_at is not None
    assert second.markdown == first.markdown
    assert answers(url) == 1
    async with httpx.AsyncClient(base_url=gateway.url, timeout=SDK_TIMEOUT_S) as http:
        # firecrawl-py's scrape() has no min_age: the body as Firecrawl documents it
        aged = await http.post("/v2/scrape", json={"url": url, "minAge": 1})
        unaged = await http.post("/v2/scrape", json={"url": never, "minAge": 1})
    assert aged.json()["data"]["metadata"]["cacheState"] == "hit", aged.text
    assert unaged.status_code == 404
    assert unaged.json()["code"] == "SCRAPE_NO_CACHED_DATA"
    fresh = await asyncio.to_thread(scrape, url, max_age=0)
    assert fresh.metadata_typed.cache_state == "miss"
    assert answers(url) == 2
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(scrape, never, lockdown=True)
    assert raised.value.status_code == 404
    assert raised.value.code == "SCRAPE_LOCKDOWN_CACHE_MISS"
    assert answers(never) == 0
