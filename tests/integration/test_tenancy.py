"""Tenants and deployments on one cluster: one tenant's pages, one deployment's workers or
one forged record reach no other's results."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from harness import Topics, WorkerProcess, collecting, produce, read_topic
from hostsite import serve_hosts

from service.contracts import (
    CrawlOptions,
    CrawlRequest,
    CrawlSpec,
    ErrorCode,
    PageTask,
    dump,
)
from service.messaging.publisher import JSON_HEADERS
from service.messaging.topics import ensure_topics

if TYPE_CHECKING:
    from harness import Collected

pytestmark = pytest.mark.integration

DONE_DEADLINE_S = 120.0
"""A loaded 2-core machine: 100 pages over the HTTP path, or one page, with room to spare."""


async def _partitions(bootstrap: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topic])
        return len(described["partitions"])
    finally:
        await admin.close()


async def test_a_worker_creates_the_frontier_topic_with_the_requests_topics_partitions(
    kafka, tmp_path
):
    """A requests topic made by hand with 1 partition: the worker creates the frontier topic
    with 1 partition too (not `CRAWL_REQUESTS_PARTITIONS`) and starts."""
    topics = Topics(bootstrap=kafka)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topics.requests, 1, 1)])
    finally:
        await admin.close()
    worker = WorkerProcess(
        topics.env(CRAWL_ROLE="coordinator"), tmp_path / "w.log", "w", command=("worker",)
    )
    try:
        await worker.start()
    finally:
        await worker.close()
    assert await _partitions(kafka, topics.frontier) == 1


INTERNAL_ENV = (
    "CRAWL_PAGES_TOPIC",
    "CRAWL_FRONTIER_TOPIC",
    "CRAWL_HOSTS_TOPIC",
    "CRAWL_CACHE_INDEX_TOPIC",
    "CRAWL_CACHE_BODIES_TOPIC",
    "CRAWL_FETCHER_GROUP_ID",
)
"""What the harness names per test; a deployment that sets only its group leaves them out."""

HOSTS = 10
PAGES_PER_HOST = 10


def _deployment_env(topics: Topics, allowed: str, **extra: str) -> dict[str, str]:
    """A deployment that names its requests, results, progress topics and its group only."""
    env = topics.env(CRAWL_ALLOWED_HOSTS=allowed, **extra)
    return {name: value for name, value in env.items() if name not in INTERNAL_ENV}


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


@pytest.mark.long_running
async def test_a_deployment_renders_and_publishes_only_its_own_pages(kafka, tmp_path):
    """Deployments A (one worker) and B (one worker) on one broker, each naming only its
    own requests, results, progress topics and group: all 100 pages of B's request land in
    B's results, none in A's (internal topics and the fetcher group follow the group)."""
    async with serve_hosts() as hosts:
        allowed = hosts.allowed_hosts(HOSTS)
        a, b = Topics(bootstrap=kafka), Topics(bootstrap=kafka)
        workers = [
            WorkerProcess(_deployment_env(a, allowed), tmp_path / "a.log", "a"),
            WorkerProcess(_deployment_env(b, allowed), tmp_path / "b.log", "b"),
        ]
        try:
            for worker in workers:
                await worker.start()
            urls = [
                f"{hosts.origin(n)}/page/{i}" for n in range(HOSTS) for i in range(PAGES_PER_HOST)
            ]
            async with collecting(a) as seen_a, collecting(b) as seen_b:
                await produce(b, [_request("b-hundred", urls, render="http")])
                await seen_b.wait_until(
                    lambda seen: seen.terminal("b-hundred"), deadline_s=DONE_DEADLINE_S
                )
                [terminal] = seen_b.seen.terminal("b-hundred")
                in_b = {r.url for r in seen_b.seen.results_of("b-hundred")}
                in_a = seen_a.seen.results_of("b-hundred")
        finally:
            for worker in workers:
                await worker.close()
    assert terminal.succeeded == len(urls)
    assert in_a == []
    assert in_b == set(urls)


async def test_a_forged_page_task_puts_no_result_in_the_victims_stream(
    topics, collector, site, start_worker
):
    """A `PageTask` written straight to the pages topic with a victim's request_id, run_id
    and source, without the deployment's tag: the worker ignores it (logs it once), and no
    forged result reaches the victim's results."""
    worker = await start_worker()
    await produce(topics, [_request("victim", [site.url("/page/1")])])
    await collector.wait_until(lambda seen: seen.terminal("victim"), deadline_s=DONE_DEADLINE_S)
    [genuine] = collector.seen.results_of("victim")
    forged_url = site.url("/page/forged")
    task = PageTask(
        request_id="victim",
        run_id=genuine.run_id,
        url=forged_url,
        options=CrawlOptions(),
        source=genuine.source,
    )
    forged_headers = [*JSON_HEADERS, ("crawlstream-tag", b"0" * 64)]
    producer = AIOKafkaProducer(bootstrap_servers=topics.bootstrap, acks="all")
    await producer.start()
    try:
        key = f"127.0.0.1:{site.port}".encode()
        for partition in range(4):  # whichever partition the host is on
            await producer.send_and_wait(
                topics.pages, dump(task), key=key, headers=forged_headers, partition=partition
            )
    finally:
        await producer.stop()

    def forged(seen: Collected) -> bool:
        return any(r.url == forged_url for r in seen.results_of("victim"))

    async with asyncio.timeout(DONE_DEADLINE_S):
        while not forged(collector.seen) and not _logged(worker, "internal.record_rejected"):
            await asyncio.sleep(0.2)
    assert not forged(collector.seen)
    [rejected] = [e for e in worker.events() if e.get("event") == "internal.record_rejected"]
    assert (rejected["topic"], rejected["reason"]) == (topics.pages, "forged")


async def _record_of(topics: Topics, path: str, records: int) -> tuple[int, int]:
    """The page partition and offset of the (first) task of `path`."""
    for record in await read_topic(topics.bootstrap, topics.pages, records, KILL_DEADLINE_S):
        if urlsplit(PageTask.model_validate_json(record.value).url).path == path:
            return record.partition, record.offset
    raise AssertionError(f"no task of {path}")


async def _charges(topics: Topics, record: tuple[int, int]) -> int:
    """Deaths charged to a page record in the fetchers' committed metadata: each death
    counted, plus one when it is marked a suspect."""
    from service.messaging.offsets import decode_metadata  # noqa: PLC0415  # runs on old code

    admin = AIOKafkaAdminClient(bootstrap_servers=topics.bootstrap)
    await admin.start()
    try:
        found = await admin.list_consumer_group_offsets(topics.env()["CRAWL_FETCHER_GROUP_ID"])
    finally:
        await admin.close()
    partition, offset = record
    meta = found.get(TopicPartition(topics.pages, partition))
    if meta is None or meta.offset < 0 or meta.offset > offset:
        return 0
    decoded = decode_metadata(meta.metadata or "", meta.offset)
    suspects = decoded[3] if len(decoded) > 3 else set()  # type: ignore[misc]
    return decoded[1].get(offset, 0) + (offset in suspects)


def _logged(worker: WorkerProcess, event: str) -> bool:
    return any(entry.get("event") == event for entry in worker.events())


PACED_CRAWLS = 5
PACED_SEEDS = 20
PACE_MS = 30_000
SMALL_REQUESTS = 8


@pytest.mark.long_running
async def test_other_tenants_pages_answer_while_a_host_on_their_partition_is_paced(kafka, tmp_path):
    """Five deep crawls of host X paced at `delay_ms: 30000` fill page partition 0 with
    pages waiting for their turn; eight 1-URL requests to host V on the same partition
    (one page partition) all complete while the crawls are still paced."""
    async with serve_hosts() as hosts:
        topics = Topics(
            bootstrap=kafka,
            extra_env={"CRAWL_ALLOWED_HOSTS": hosts.allowed_hosts(2), "CRAWL_PAGE_PARTITIONS": "1"},
        )
        await ensure_topics(topics.settings(page_partitions=1))
        workers = [
            WorkerProcess(topics.env(CRAWL_ROLE="coordinator"), tmp_path / "c.log", "c"),
            WorkerProcess(topics.env(CRAWL_ROLE="fetcher"), tmp_path / "f.log", "f"),
        ]
        try:
            for worker in workers:
                await worker.start()
            async with collecting(topics) as collector:
                crawls = [f"paced-{n}" for n in range(PACED_CRAWLS)]
                seeds = [f"{hosts.origin(0)}/page/{i}" for i in range(PACED_SEEDS)]
                spec = CrawlSpec(max_pages=PACED_SEEDS, max_depth=0, delay_ms=PACE_MS)
                await produce(
                    topics,
                    [
                        (rid.encode(), dump(CrawlRequest(request_id=rid, urls=seeds, crawl=spec)))
                        for rid in crawls
                    ],
                )
                await collector.wait_until(
                    lambda seen: all(seen.results_of(rid) for rid in crawls),
                    deadline_s=DONE_DEADLINE_S,
                )  # each crawl's first page is out: the rest wait for their turn
                small = [f"small-{n}" for n in range(SMALL_REQUESTS)]
                await produce(
                    topics,
                    [_request(rid, [f"{hosts.origin(1)}/page/{n}"]) for n, rid in enumerate(small)],
                )
                await collector.wait_until(
                    lambda seen: all(seen.terminal(rid) for rid in small),
                    deadline_s=DONE_DEADLINE_S,
                )
                done = collector.seen
        finally:
            for worker in workers:
                await worker.close()
    assert all(done.terminal(rid)[0].succeeded == 1 for rid in small)
    assert [rid for rid in crawls if done.terminal(rid)] == []  # still paced meanwhile


STATIC_FETCHER = {"CRAWL_STATIC_MEMBERSHIP": "true", "CRAWL_WORKER_NAME": "fetcher"}
"""A fetcher restarted under its name takes its page partitions back at once."""

INNOCENT_PAGES = 14
INNOCENT_MS = 6000
"""Long enough to be rendering beside the killer when the kill comes."""

KILLS = 3
BESIDE = 5
"""Pages rendering at once when the first kill comes."""
KILL_DEADLINE_S = 240.0


@pytest.mark.long_running
async def test_pages_in_flight_beside_a_killer_are_not_quarantined(kafka, tmp_path):
    """With CRAWL_MAX_DELIVERIES=2, the fetcher is killed three times from outside while a
    hanging page and up to 7 innocent pages of 14 other requests render: every innocent
    page ends `ok`, and at most one page, the hanging one (alone on its worker at the
    second and third kill), ends `poison`."""
    async with serve_hosts() as hosts:
        topics = Topics(
            bootstrap=kafka,
            extra_env={"CRAWL_ALLOWED_HOSTS": hosts.allowed_hosts(4), "CRAWL_MAX_DELIVERIES": "2"},
        )
        await ensure_topics(topics.settings())
        hang = f"{hosts.origin(0)}/slow/hang?ms=600000"
        innocents = [
            f"{hosts.origin(n % 4)}/slow/innocent-{n}?ms={INNOCENT_MS}"
            for n in range(INNOCENT_PAGES)
        ]
        coordinator = WorkerProcess(topics.env(CRAWL_ROLE="coordinator"), tmp_path / "c.log", "c")
        fetchers: list[WorkerProcess] = []

        async def fetcher() -> WorkerProcess:
            env = topics.env(CRAWL_ROLE="fetcher", **STATIC_FETCHER)
            started = WorkerProcess(env, tmp_path / f"f{len(fetchers)}.log", "fetcher")
            fetchers.append(started)
            await started.start()
            return started

        try:
            await coordinator.start()
            current = await fetcher()
            async with collecting(topics) as collector:
                requests = {"hang": hang} | {f"innocent-{n}": u for n, u in enumerate(innocents)}
                await produce(topics, [_request(rid, [url]) for rid, url in requests.items()])
                await collector.wait_until(
                    lambda _: hosts.load.now.total() >= BESIDE, deadline_s=KILL_DEADLINE_S
                )  # the hanging page and innocent ones render
                hang_record = await _record_of(topics, "/slow/hang", len(requests))
                for kill in range(1, KILLS + 1):
                    async with asyncio.timeout(KILL_DEADLINE_S):
                        while not collector.seen.terminal("hang"):
                            if await _charges(topics, hang_record) >= kill:
                                break  # rendering, and its record charged for it
                            await asyncio.sleep(0.2)
                    if collector.seen.terminal("hang"):
                        break  # quarantined already: nothing left to aim at
                    await current.kill()
                    current = await fetcher()
                await collector.wait_until(
                    lambda seen: all(seen.terminal(rid) for rid in requests),
                    deadline_s=KILL_DEADLINE_S,
                )
                results = {rid: collector.seen.results_of(rid) for rid in requests}
        finally:
            await coordinator.close()
            for started in fetchers:
                await started.close()
    poison = [
        rid
        for rid, found in results.items()
        if any(r.error is not None and r.error.code == ErrorCode.POISON for r in found)
    ]
    assert set(poison) <= {"hang"}, poison
    errors = {  # a page rendered again after a kill repeats its result (same result_id)
        rid: [r.error for r in found if r.error is not None]
        for rid, found in results.items()
        if rid != "hang"
    }
    assert {rid: found for rid, found in errors.items() if found} == {}
    assert all(results[rid] for rid in errors)
