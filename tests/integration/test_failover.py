"""Failover that redoes little: done work is skipped, deaths are counted, drains are kept."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from ports import unused_port

from service.contracts import CrawlRequest, ErrorCode, EventType, dump

pytestmark = pytest.mark.integration

CHARGE_DEADLINE_S = 30.0

STATIC = {"CRAWL_STATIC_MEMBERSHIP": "true"}
"""A restarted static member takes its partitions back at once (no session-timeout wait)."""


async def _produce(bootstrap: str, topic: str, requests: dict[str, list[str]], partition: int):
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for rid, urls in requests.items():
            value = dump(CrawlRequest(request_id=rid, urls=urls))
            await producer.send_and_wait(topic, value, key=rid.encode(), partition=partition)
    finally:
        await producer.stop()


def _runs(collector, request_id: str) -> list[str]:
    """Run ids in the order their `accepted` events arrived."""
    return [e.run_id for e in collector.seen.events_of(request_id) if e.type == EventType.ACCEPTED]


async def _group_offsets(bootstrap: str, group: str) -> dict[TopicPartition, tuple[int, str]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        found = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp: (meta.offset, meta.metadata or "") for tp, meta in found.items()}


@pytest.mark.long_running
async def test_a_page_that_kills_its_fetcher_gets_a_poison_result(
    topics, collector, site, start_worker
):
    """Killed while one page renders: once in the local lane (the first worker's fetcher
    owns every page partition, so its coordinator hands it the pages directly and no page
    record counts that death), once as the redelivered request's page record rendering
    beside others (that death makes it a suspect only), then CRAWL_MAX_DELIVERIES (3) times
    while it renders alone. The next delivery of that record is not rendered; the page gets
    a failed result with code `poison`, the request's other page is `ok`, and the run
    completes. The request itself is not quarantined (before: it went to the dead letters
    and every URL failed `poison`)."""
    poison, fine = site.url("/slow/poison-1?ms=600000"), site.url("/page/1")
    first = await start_worker("poison-0", CRAWL_WORKER_NAME="pw", **STATIC)
    await collector.wait_until(lambda _: _owns_page_partitions(first), deadline_s=120)
    await _produce(topics.bootstrap, topics.requests, {"poison-1": [poison, fine]}, partition=0)
    await collector.wait_until(
        lambda seen: site.hits["/slow/poison-1"] > 0 and seen.results_of("poison-1"),
        deadline_s=120,
    )  # the other page answered, this one loading in the lane
    await first.kill()
    group = topics.env()["CRAWL_FETCHER_GROUP_ID"]
    for death in range(1, 5):
        worker = await start_worker(f"poison-{death}", CRAWL_WORKER_NAME="pw", **STATIC)
        await collector.wait_until(
            lambda _, n=death: site.hits["/slow/poison-1"] > n, deadline_s=120
        )  # the page is loading
        await _until_charged(topics.bootstrap, group, deliveries=death - 1)
        await worker.kill()
    survivor = await start_worker("poison-last", CRAWL_WORKER_NAME="pw", **STATIC)
    await collector.wait_until(
        lambda seen: any(
            {r.url for r in seen.results_of("poison-1")} == {poison, fine}
            for _ in seen.terminal("poison-1")
        ),
        deadline_s=120,
    )  # its terminal event and both results (another topic, read apart) have arrived

    [terminal] = collector.seen.terminal("poison-1")
    assert terminal.type == EventType.COMPLETED
    by_url = {r.url: r for r in collector.seen.results_of("poison-1")}
    assert (terminal.total, terminal.failed, terminal.succeeded) == (2, 1, 1), by_url
    assert by_url[poison].error is not None
    assert by_url[poison].error.code == ErrorCode.POISON
    assert by_url[fine].ok
    # each worker's coordinator ran the request again if it got the partition before the
    # kill (the fetcher may render first); the last one completed it
    assert terminal.run_id == _runs(collector, "poison-1")[-1]
    # one render in the lane, uncounted, one on the topic that made it a suspect, and
    # three counted while it rendered alone
    assert site.hits["/slow/poison-1"] == 5
    events = [entry["event"] for entry in survivor.events()]
    assert "page.poison" in events
    assert "request.poison" not in events


async def _until_charged(bootstrap: str, group: str, *, deliveries: int) -> None:
    """Wait until the fetchers' group has committed a charge of the rendering page: a suspect
    or a delivery (`deliveries` 0), else `deliveries` counted deliveries. The charge is
    committed beside the render, within a poll of its start (docs/decisions/
    charge-while-rendering.md): a kill before it lands is not counted."""
    from service.messaging.offsets import decode_metadata  # noqa: PLC0415

    async def charged() -> bool:
        for position, metadata in (await _group_offsets(bootstrap, group)).values():
            _, counts, _, suspects = decode_metadata(metadata, position)
            if deliveries == 0 and (suspects or counts):
                return True
            if deliveries and any(n >= deliveries for n in counts.values()):
                return True
        return False

    async with asyncio.timeout(CHARGE_DEADLINE_S):
        while not await charged():
            await asyncio.sleep(0.3)


def _owns_page_partitions(worker) -> bool:
    """The worker's fetcher has its page partitions (its log says so)."""
    return any(
        e.get("event") == "consumer.assigned" and e.get("consumer") == "page" and e["partitions"]
        for e in worker.events()
    )


@pytest.mark.long_running
async def test_requests_completed_behind_an_unfinished_one_are_not_run_again(
    topics, collector, site, start_worker
):
    """One slow request holds the committed offset; five behind it complete; the worker is
    killed. The next owner runs the slow one again but skips the five."""
    slow = {"held": [site.url("/slow/held?ms=25000")]}
    quick = {f"behind-{i}": [site.url(f"/page/{700 + i}")] for i in range(5)}
    worker = await start_worker("first", CRAWL_WORKER_NAME="fo", **STATIC)
    await _produce(topics.bootstrap, topics.requests, slow | quick, partition=0)
    await collector.wait_until(lambda seen: all(seen.terminal(r) for r in quick), deadline_s=120)

    group = topics.env()["CRAWL_GROUP_ID"]
    tp = TopicPartition(topics.requests, 0)

    from service.messaging.offsets import decode_metadata  # noqa: PLC0415  # runs on old code

    async def behind_are_recorded_done() -> bool:
        position, metadata = (await _group_offsets(topics.bootstrap, group)).get(tp, (0, ""))
        done, *_ = decode_metadata(metadata, position)
        return position == 0 and done == {1, 2, 3, 4, 5}

    async with asyncio.timeout(30):
        while not await behind_are_recorded_done():
            await asyncio.sleep(0.3)
    await worker.kill()
    second = await start_worker("second", CRAWL_WORKER_NAME="fo", **STATIC)
    await collector.wait_until(lambda seen: seen.terminal("held"), deadline_s=120)

    assert len(_runs(collector, "held")) == 2
    for rid in quick:
        assert len(_runs(collector, rid)) == 1, rid
    skipped = [e for e in second.events() if e.get("event") == "request.skipped"]
    assert sorted(e["offset"] for e in skipped) == [1, 2, 3, 4, 5]


@pytest.mark.long_running
async def test_a_draining_worker_keeps_its_requests_when_another_joins(
    topics, collector, site, start_worker
):
    """SIGTERM while four 25 s pages load, then a new worker joins while the first drains:
    the rebalance does not cut the drain short at the 5 s revoke grace; the draining worker
    finishes its requests (one run each) within its shutdown grace (60 s here, so the pages
    fit in it on a loaded machine) and exits 0."""
    first = await start_worker("drainer", CRAWL_SHUTDOWN_GRACE="60")
    requests = {f"drain-{i}": [site.url(f"/slow/drain-{i}?ms=25000")] for i in range(4)}
    await _produce(topics.bootstrap, topics.requests, requests, partition=0)
    await collector.wait_until(
        lambda _: all(site.hits[f"/slow/{rid}"] for rid in requests), deadline_s=120
    )  # every page is loading
    assert first.process is not None
    first.process.send_signal(15)
    await start_worker("joiner")
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in requests), deadline_s=180
    )
    assert await asyncio.wait_for(first.process.wait(), 90) == 0
    for rid in requests:
        assert len(_runs(collector, rid)) == 1, [
            (e.type, e.worker, e.run_id[:6]) for e in collector.seen.events_of(rid)
        ]
        [terminal] = collector.seen.terminal(rid)
        assert (terminal.type, terminal.worker) == (EventType.COMPLETED, "drainer"), rid


def _free_port() -> int:
    return unused_port()


async def _metrics(port: int) -> dict[str, float]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"http://127.0.0.1:{port}/metrics", timeout=aiohttp.ClientTimeout(total=5)
        ) as response,
    ):
        text = await response.text()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def _lag_partitions(samples: dict[str, float]) -> set[str]:
    return {name for name in samples if name.startswith("crawl_consumer_lag{")}


@pytest.mark.long_running
async def test_lag_counts_unfinished_requests_and_follows_ownership(
    topics, collector, site, start_worker
):
    """crawl_consumer_lag is end offset minus committed offset: six requests fetched but
    unfinished count as 6 (they counted 0 before); pending pages and requests show the work;
    after a second worker joins, each partition is exported by its owner only."""
    ports = _free_port(), _free_port()
    await start_worker("lag-1", CRAWL_METRICS_PORT=str(ports[0]))
    requests = {f"lag-{i}": [site.url(f"/slow/lag-{i}?ms=25000")] for i in range(6)}
    await _produce(topics.bootstrap, topics.requests, requests, partition=0)
    await collector.wait_until(
        lambda _: all(_runs(collector, rid) for rid in requests), deadline_s=120
    )

    working = {
        'crawl_consumer_lag{partition="0"}': 6,
        "crawl_requests_in_flight": 6,
        "crawl_pages_pending": 6,
    }

    def shows_the_work(samples: dict[str, float]) -> bool:
        return all(samples.get(name) == value for name, value in working.items())

    # one scrape shows all three while the pages hang (25 s): the gauges are read together
    async with asyncio.timeout(30):
        while not shows_the_work(samples := await _metrics(ports[0])):
            await asyncio.sleep(0.5)
    assert samples["crawl_last_poll_timestamp_seconds"] > 0

    await start_worker("lag-2", CRAWL_METRICS_PORT=str(ports[1]))
    everything = {f'crawl_consumer_lag{{partition="{p}"}}' for p in range(4)}

    async def owners_split() -> bool:
        first, second = [_lag_partitions(await _metrics(port)) for port in ports]
        return bool(first) and bool(second) and not first & second and first | second == everything

    async with asyncio.timeout(90):
        while not await owners_split():
            await asyncio.sleep(0.5)


async def test_a_poll_brings_in_no_more_than_the_page_backlog_has_room_for(
    topics, collector, site, start_worker
):
    """Twenty 10-URL requests of hanging pages on one partition: the coordinator takes them
    and dispatches their pages (a window of 16 per run and host); the fetcher's intake stops
    within its page backlog bound (CRAWL_MAX_QUEUED_PAGES, 40) plus the page slots (8) and
    holds the page partition (a slot's worth of its records wait: its one host renders 4 at
    once), instead of taking a whole fetch batch (200 pages) at once. The local lane is off:
    it would hand the pages to this same process's fetcher without the topic, and this test
    is about the pages consumer's poll. Every reading until the coordinator has dispatched
    more than the bound keeps the fetcher's records within it (one reading of two gauges that
    move, taken at the first hold, could see the first run's pages only)."""
    port = _free_port()
    await start_worker("intake", CRAWL_METRICS_PORT=str(port), CRAWL_LOCAL_PAGES="false")
    requests = {
        f"intake-{r}": [site.url(f"/slow/intake-{r}-{u}?ms=25000") for u in range(10)]
        for r in range(20)
    }
    await _produce(topics.bootstrap, topics.requests, requests, partition=0)
    bound = 40 + 8
    async with asyncio.timeout(60):
        while True:
            samples = await _metrics(port)
            assert samples["crawl_page_records_pending"] <= bound, samples
            held = samples.get("crawl_page_partitions_held")
            if held and samples["crawl_pages_dispatched"] > bound:
                break
            await asyncio.sleep(0.2)
    assert 0 < samples["crawl_pages_pending"] <= bound, samples["crawl_pages_pending"]
    assert samples.get("crawl_consumer_paused") == 0  # the coordinator pauses for nothing
