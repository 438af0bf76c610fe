"""One tenant's cursor, record, metadata, body or poll never stops the gateway for another,
and limits hold across replicas and every kind of call. Real broker, worker, gateway
replicas (processes) and the local test site; tenants `tenant-a` and `tenant-b`.

Tests that neither configure, restart nor stop their worker or gateway share one of each
(`shared_worker`, `keyed_gateway`), each with tenants A and B of its own (`<test>-a` and
`<test>-b`, one job at a time each: no job an earlier test left running holds their slot);
those that only read jobs written as a worker would share `written_gateway`, on topics no
worker reads."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import pytest
import websockets
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from firecrawl import Firecrawl
from gateway import GatewayProcess, free_port, gateway_starter, running_gateway
from harness import Topics, read_topic, wait_for_leaders
from waiting import until

from service.client import CrawlClient
from service.contracts import (
    CrawlRequest,
    EventType,
    PageResult,
    ProgressEvent,
    dump,
    dump_request,
)
from service.gateway.jobs import MARKER_KEY, JobMarker
from service.gateway.paging import Cursor
from service.messaging.topics import ensure_topics
from service.sealing.marker_auth import sealed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from testsite import TestSite

pytestmark = pytest.mark.integration

KEY_A = "fc-tenant-a-key"
KEY_B = "fc-tenant-b-key"
OPERATOR_KEY = "operator-metrics-key"
SECRET = "test-gateway-secret"  # noqa: S105 - the test replicas' CRAWL_GATEWAY_SECRET
POLL_TIMEOUT_S = 20
"""An HTTP client's patience here: below the 30 s a dead reader took to answer 500."""


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


SHARED_TESTS = ("cursors", "forged", "echo", "body-limit", "large-body", "one-job")
"""The tests on `keyed_gateway`, each with tenants `<test>-a` and `<test>-b` of its own."""


def pair(test: str) -> tuple[str, str]:
    """The keys of tenants `<test>-a` and `<test>-b` on `keyed_gateway`."""
    return f"fc-{test}-a-key", f"fc-{test}-b-key"


def _keys_file(path: Path, tenants: dict[str, str]) -> Path:
    """A keys file of `tenants` (key -> tenant), one job at a time each."""
    entries = [
        {"key": key, "tenant": tenant, "max_concurrent_jobs": 1} for key, tenant in tenants.items()
    ]
    path.write_text(json.dumps({"keys": entries}))
    return path


@pytest.fixture
async def tenants(
    topics: Topics, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[GatewayProcess]]]:
    """Gateways reading one keys file: tenants A and B, one job at a time each."""
    keys = _keys_file(tmp_path / "keys.json", {KEY_A: "tenant-a", KEY_B: "tenant-b"})
    env = functools.partial(topics.env, CRAWL_GATEWAY_KEYS_FILE=str(keys))
    async with gateway_starter(env, tmp_path) as start:
        yield start


@pytest.fixture(scope="module")
def shared_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The keys file of `keyed_gateway`: tenants A and B of each of `SHARED_TESTS`."""
    tenants = {
        key: f"{test}-{side}"
        for test in SHARED_TESTS
        for side, key in zip("ab", pair(test), strict=True)
    }
    return _keys_file(tmp_path_factory.mktemp("shared-keys") / "keys.json", tenants)


@pytest.fixture(scope="module")
async def keyed_gateway(
    shared_topics: Topics, shared_keys: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayProcess]:
    """One replica reading `shared_keys` on the shared topics (where `shared_worker` runs),
    for the tests that neither configure nor stop theirs."""
    log = tmp_path_factory.mktemp("keyed-gateway") / "keyed.log"
    env = shared_topics.env(CRAWL_GATEWAY_KEYS_FILE=str(shared_keys))
    async with running_gateway(env, log, "keyed") as gateway:
        yield gateway


@pytest.fixture
async def second_replica(
    shared_topics: Topics, shared_keys: Path, tmp_path: Path
) -> AsyncIterator[GatewayProcess]:
    """Another replica like `keyed_gateway`, of this test only."""
    env = shared_topics.env(CRAWL_GATEWAY_KEYS_FILE=str(shared_keys))
    async with running_gateway(env, tmp_path / "g2.log", "g2") as gateway:
        yield gateway


@pytest.fixture
async def cancelled_after(shared_topics: Topics) -> AsyncIterator[set[str]]:
    """Tenants whose requests on the shared topics are cancelled after the test: the slow
    pages it leaves running would keep `shared_worker` rendering (and spending CPU) after it,
    where a worker of its own was stopped with it."""
    tenants: set[str] = set()
    yield tenants
    await _cancel_requests_of(shared_topics, tenants)


async def _cancel_requests_of(topics: Topics, tenants: set[str]) -> None:
    """Cancel every request on `topics` whose gateway marker names one of `tenants` (one
    already finished is left as it is)."""
    settings = topics.settings()
    partitions = [TopicPartition(topics.requests, p) for p in range(settings.requests_partitions)]
    consumer = AIOKafkaConsumer(bootstrap_servers=topics.bootstrap, enable_auto_commit=False)
    await consumer.start()
    ids: set[str] = set()
    try:
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        async with asyncio.timeout(30):
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    for record in records:
                        metadata = json.loads(record.value).get("metadata") or {}
                        if (metadata.get(MARKER_KEY) or {}).get("tenant") in tenants:
                            ids.add(record.key.decode())
    finally:
        await consumer.stop()
    async with CrawlClient(settings) as client:
        for request_id in ids:
            await client.cancel(request_id, "left running by a test of the shared worker")


@pytest.fixture(scope="module")
async def written_topics(kafka: str, site: TestSite) -> Topics:
    """Topics of the tests that write their jobs as the gateway and a worker would: no worker
    reads them (it would run the written requests and end them)."""
    made = Topics(bootstrap=kafka, extra_env={"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site.port}"})
    await ensure_topics(made.settings())
    await wait_for_leaders(made)
    return made


@pytest.fixture(scope="module")
async def written_gateway(
    written_topics: Topics, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayProcess]:
    """One replica of tenants A and B (as `tenants`) with the `SECRET` the written jobs'
    markers are sealed with, shared by the tests that only read such jobs."""
    path = tmp_path_factory.mktemp("written-gateway")
    keys = _keys_file(path / "keys.json", {KEY_A: "tenant-a", KEY_B: "tenant-b"})
    env = written_topics.env(CRAWL_GATEWAY_KEYS_FILE=str(keys), CRAWL_GATEWAY_SECRET=SECRET)
    async with running_gateway(env, path / "written.log", "written") as gateway:
        yield gateway


async def _done(client: httpx.AsyncClient, path: str, key: str) -> dict[str, Any]:
    """The job's status once it has ended (polled, 90 s deadline)."""
    async with asyncio.timeout(90):
        while True:
            body: dict[str, Any] = (await client.get(path, headers=auth(key))).json()
            if body.get("status") in {"completed", "failed", "cancelled"}:
                return body
            await asyncio.sleep(0.3)


async def test_a_job_the_worker_rejects_ends_failed_and_frees_its_slot(
    start_worker, tenants, site: TestSite
):
    """A worker configured for smaller metadata than the gateway (2 KiB here, to make it
    reject what the gateway let through) rejects the crawl: it ends `failed`, and the
    tenant's one slot is free again."""
    await start_worker(CRAWL_MAX_METADATA_BYTES="2048")
    gateway = await tenants()
    body = {
        "url": site.url("/"),
        "limit": 2,
        "scrapeOptions": {"actions": [{"type": "executeJavascript", "script": "1" * 3_000}]},
    }
    async with httpx.AsyncClient(base_url=gateway.url, timeout=POLL_TIMEOUT_S) as client:
        started = await client.post("/v2/crawl", json=body, headers=auth(KEY_A))
        assert started.status_code == 200, started.text
        ended = await _done(client, f"/v2/crawl/{started.json()['id']}", KEY_A)
        assert ended["status"] == "failed"
        again = await client.post(
            "/v2/crawl", json={"url": site.url("/"), "limit": 1}, headers=auth(KEY_A)
        )
    assert again.status_code == 200, again.text


async def test_metrics_need_the_operator_key_and_name_no_tenant_to_anyone_else(
    start_worker, tenants, site: TestSite
):
    """`/metrics` answers 401 without a key and to a tenant's key; the operator's key gets the
    series (with tenants); without a metrics key set, nobody gets them on the API port, and
    the metrics port of its own (not the API's) serves them."""
    gateway = await tenants(CRAWL_GATEWAY_METRICS_KEY=OPERATOR_KEY)
    metrics_port = free_port()
    closed = await tenants("g2", CRAWL_GATEWAY_METRICS_PORT=str(metrics_port))
    async with httpx.AsyncClient(timeout=POLL_TIMEOUT_S) as client:
        await client.post(
            f"{gateway.url}/v2/crawl", json={"url": site.url("/"), "limit": 1}, headers=auth(KEY_A)
        )
        anonymous = await client.get(f"{gateway.url}/metrics")
        tenant = await client.get(f"{gateway.url}/metrics", headers=auth(KEY_B))
        operator = await client.get(f"{gateway.url}/metrics", headers=auth(OPERATOR_KEY))
        unset = await client.get(f"{closed.url}/metrics", headers=auth(OPERATOR_KEY))
        own_port = await client.get(f"http://127.0.0.1:{metrics_port}/metrics")
    assert [anonymous.status_code, tenant.status_code, unset.status_code] == [401, 401, 401]
    assert "tenant-a" not in anonymous.text + tenant.text + unset.text
    assert operator.status_code == 200
    assert 'tenant="tenant-a"' in operator.text
    assert own_port.status_code == 200
    assert "crawl_gateway_requests_total" in own_port.text


async def test_a_crawl_is_paced_to_its_tenants_pages_per_minute(
    start_worker, topics: Topics, tmp_path: Path, site: TestSite
):
    """A tenant allowed 12 pages a minute, one job at a time: its crawl's pages of the site
    start 5 s apart, so no two of them reach the site within 2.5 s of each other (5 s of
    spacing, less the spread of the time from a page's start to its request). Read where
    the pages arrive, not when they finish: on a loaded machine one page renders in 16 s and
    the next in 0.7 s."""
    await start_worker()
    keys = tmp_path / "paced.json"
    entry = {"key": KEY_A, "tenant": "tenant-a", "max_concurrent_jobs": 1, "pages_per_minute": 12}
    keys.write_text(json.dumps({"keys": [entry]}))
    env = topics.env(CRAWL_GATEWAY_KEYS_FILE=str(keys))
    async with (
        running_gateway(env, tmp_path / "paced.log", "paced") as gateway,
        httpx.AsyncClient(base_url=gateway.url, timeout=POLL_TIMEOUT_S) as client,
    ):
        body = {"url": site.url("/"), "limit": 4, "includePaths": ["^/page/"]}
        asked_at = time.monotonic()
        started = (await client.post("/v2/crawl", json=body, headers=auth(KEY_A))).json()
        ended = await _done(client, f"/v2/crawl/{started['id']}", KEY_A)
    assert ended["completed"] == 4
    records = await read_topic(
        topics.bootstrap, topics.results, count=4, deadline_s=30, key=started["id"].encode()
    )
    paths = {urlsplit(json.loads(record.value)["url"]).path for record in records}
    arrivals = sorted(min(at for at in site.arrivals[path] if at >= asked_at) for path in paths)
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert len(gaps) == 3
    assert min(gaps) >= 2.5, gaps


async def test_a_watcher_catches_up_a_page_at_a_time(
    written_gateway: GatewayProcess, written_topics: Topics
):
    """A watcher of an ended 130-page crawl gets `catchup` with the first page of documents
    (100), the other 30 as `document` messages, then `done`: it never holds the whole job.
    The job is written as a worker ends one (the crawl itself is the SDK tests' subject)."""
    gateway, topics = written_gateway, written_topics
    job_id = await _written_job(topics, "tenant-a", pages=130, markdown_bytes=1_000, ended=True)
    async with httpx.AsyncClient(base_url=gateway.url, timeout=POLL_TIMEOUT_S) as client:
        ended = await _done(client, f"/v2/crawl/{job_id}", KEY_A)
    assert (ended["status"], ended["completed"]) == ("completed", 130)
    url = f"ws://127.0.0.1:{gateway.port}/v2/crawl/{job_id}"
    kinds: list[tuple[str, int]] = []
    async with (
        asyncio.timeout(60),
        websockets.connect(url, additional_headers=auth(KEY_A), max_size=None) as socket,
    ):
        async for raw in socket:
            message = json.loads(raw)
            data = message.get("data") or {}
            kinds.append((message["type"], len(data.get("data", [])) if "status" in data else 1))
    assert kinds[0] == ("catchup", 100)
    assert kinds[1:-1] == [("document", 1)] * 30
    assert kinds[-1] == ("done", 0)


async def test_forty_polls_of_one_tenant_do_not_queue_another_tenants_poll(
    written_gateway: GatewayProcess, written_topics: Topics
):
    """B's 40 concurrent polls of a crawl of 10 MB pages are under way; A's poll of its own
    job is answered before B's 10th (a tenant holds at most 2 of a replica's 4 readers)."""
    gateway, topics = written_gateway, written_topics
    job_a = await _written_job(topics, "tenant-a", pages=5, markdown_bytes=1_000)
    job_b = await _written_job(topics, "tenant-b", pages=150, markdown_bytes=100_000)
    order: list[str] = []
    async with httpx.AsyncClient(base_url=gateway.url, timeout=300) as client:
        for job_id, key in ((job_a, KEY_A), (job_b, KEY_B)):
            assert (await client.get(f"/v2/crawl/{job_id}", headers=auth(key))).status_code == 200
        b_started = asyncio.Event()

        async def poll_b() -> None:
            b_started.set()
            answer = await client.get(f"/v2/crawl/{job_b}", headers=auth(KEY_B))
            order.append(f"b {answer.status_code}")

        async def poll_a() -> None:
            await b_started.wait()
            await asyncio.sleep(0)  # B's polls are sent first
            answer = await client.get(f"/v2/crawl/{job_a}", headers=auth(KEY_A))
            order.append(f"a {answer.status_code} {len(answer.json()['data'])}")

        await asyncio.gather(*(poll_b() for _ in range(40)), poll_a())
    assert "a 200 5" in order
    assert order.index("a 200 5") < 10, order
    assert order.count("b 200") + order.count("b 429") == 40


async def _written_job(
    topics: Topics, tenant: str, *, pages: int, markdown_bytes: int, ended: bool = False
) -> str:
    """A crawl of `pages` ended pages, written to the topics as the gateway and a worker
    would (its marker signed with the replicas' `CRAWL_GATEWAY_SECRET`); `ended`: with the
    run's terminal `completed` event after them."""
    settings = topics.settings()
    job_id = str(uuid.uuid4())
    async with CrawlClient(settings) as client:
        partition, offset = (await client.output_positions(job_id))[settings.results_topic]
    marker = JobMarker(
        kind="crawl", url="https://example.com/", tenant=tenant, created_at=datetime.now(UTC),
        results_partition=partition, results_offset=offset, formats=("markdown",),
    ).model_dump(mode="json")  # fmt: skip
    metadata = {MARKER_KEY: sealed(SECRET.encode(), job_id, marker)}
    producer = AIOKafkaProducer(bootstrap_servers=topics.bootstrap, max_request_size=2**21)
    await producer.start()
    try:
        request = CrawlRequest(request_id=job_id, urls=["https://example.com/"], metadata=metadata)
        key = job_id.encode()
        await producer.send(settings.requests_topic, dump_request(request), key=key)
        now = datetime.now(UTC)
        for n in range(pages):
            result = PageResult(
                request_id=job_id, result_id=f"{n:032x}", run_id="r1",
                url=f"https://example.com/p/{n}", ok=True, status_code=200,
                markdown="x" * markdown_bytes, elapsed_ms=1, fetched_at=now, worker="test",
                request_metadata=metadata,
            )  # fmt: skip
            await producer.send(settings.results_topic, dump(result), key=key)
        if ended:
            event = ProgressEvent(
                request_id=job_id, run_id="r1", seq=0, type=EventType.COMPLETED, total=pages,
                succeeded=pages, failed=0, at=now, worker="test", request_metadata=metadata,
            )  # fmt: skip
            await producer.send(settings.progress_topic, dump(event), key=key)
        await producer.flush()
    finally:
        await producer.stop()
    return job_id


async def test_a_status_page_of_10_mb_is_streamed_and_reads_whole_through_the_sdk(
    written_gateway: GatewayProcess, written_topics: Topics
):
    """A crawl of 150 documents of 100 KB: its first status page (100 documents, 10 MB) is
    sent chunked (no Content-Length) and parses to the documents in order; `firecrawl-py`
    reads all 150 through `next`, each document whole."""
    gateway, topics = written_gateway, written_topics
    job_id = await _written_job(topics, "tenant-b", pages=150, markdown_bytes=100_000)
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=POLL_TIMEOUT_S) as client,
        client.stream("GET", f"/v2/crawl/{job_id}", headers=auth(KEY_B)) as answer,
    ):
        headers = answer.headers
        body = json.loads(await answer.aread())
    assert answer.status_code == 200
    assert headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in headers
    assert body["status"] == "scraping"
    assert body["next"] is not None
    assert [doc["metadata"]["sourceURL"] for doc in body["data"]] == [
        f"https://example.com/p/{n}" for n in range(100)
    ]
    assert {doc["markdown"] for doc in body["data"]} == {"x" * 100_000}
    app = Firecrawl(api_key=KEY_B, api_url=gateway.url)
    everything = await asyncio.to_thread(app.get_crawl_status, job_id)
    assert [doc.metadata.source_url for doc in everything.data] == [
        f"https://example.com/p/{n}" for n in range(150)
    ]
    assert all(doc.markdown == "x" * 100_000 for doc in everything.data)


# The tests sharing `shared_worker` and `keyed_gateway` come last: shared processes stop
# with the module, and these do not idle through the tests before them.


async def test_cursors_past_a_kafka_offset_or_the_results_are_400_and_kill_no_reader(
    shared_worker, keyed_gateway: GatewayProcess, site: TestSite
):
    """B's polls with a cursor at 2^64 (four at once) and past the partition's end are 400;
    A's poll then answers 200 and the replica stays ready."""
    key_a, key_b = pair("cursors")
    gateway = keyed_gateway
    async with httpx.AsyncClient(base_url=gateway.url, timeout=POLL_TIMEOUT_S) as client:
        ids = {}
        for key in (key_a, key_b):
            started = await client.post(
                "/v2/batch/scrape", json={"urls": [site.url("/page/1")]}, headers=auth(key)
            )
            ids[key] = started.json()["id"]
            await _done(client, f"/v2/batch/scrape/{ids[key]}", key)
        bad = [Cursor(offset=2**64).token()] * 4 + [Cursor(offset=10**12).token()]
        answers = await asyncio.gather(
            *(
                client.get(f"/v2/batch/scrape/{ids[key_b]}?cursor={token}", headers=auth(key_b))
                for token in bad
            )
        )
        assert [a.status_code for a in answers] == [400] * 5
        assert all("cursor" in a.json()["error"] for a in answers)
        polled = await client.get(f"/v2/batch/scrape/{ids[key_a]}", headers=auth(key_a))
        assert polled.status_code == 200
        assert len(polled.json()["data"]) == 1
        assert (await client.get("/readyz")).status_code == 200


async def test_a_forged_marker_is_no_job_of_the_tenant_it_names(
    shared_worker,
    keyed_gateway: GatewayProcess,
    shared_topics: Topics,
    cancelled_after: set[str],
    site: TestSite,
):
    """A request record whose metadata carries a marker naming tenant B (unsigned, and one
    copied from B's own job) is 404 for B, not counted against B's one job, and B can start."""
    _, key_b = pair("forged")
    cancelled_after.add("forged-b")  # the forged requests' pages answer after 60 s
    gateway, topics = keyed_gateway, shared_topics
    async with httpx.AsyncClient(base_url=gateway.url, timeout=POLL_TIMEOUT_S) as client:
        genuine = await client.post(
            "/v2/batch/scrape", json={"urls": [site.url("/page/2")]}, headers=auth(key_b)
        )
        genuine_id = genuine.json()["id"]
        await _done(client, f"/v2/batch/scrape/{genuine_id}", key_b)
        copied = await _marker_of(topics, genuine_id)
        forged = {
            "kind": "batch", "url": site.url("/slow?ms=60000"), "tenant": "forged-b",
            "created_at": datetime.now(UTC).isoformat(), "results_partition": 0,
            "results_offset": 2**62, "formats": ["markdown"],
        }  # fmt: skip
        forged_ids = [str(uuid.uuid4()), str(uuid.uuid4())]
        async with CrawlClient(topics.settings()) as producer:
            for job_id, marker in zip(forged_ids, (forged, copied), strict=True):
                await producer.submit(
                    [site.url("/slow?ms=60000")], request_id=job_id, metadata={"firecrawl": marker}
                )
        for job_id in forged_ids:
            answer = await client.get(f"/v2/batch/scrape/{job_id}", headers=auth(key_b))
            assert answer.status_code == 404, answer.text
        check = await client.get("/v2/concurrency-check", headers=auth(key_b))
        assert check.json()["concurrency"] == 0
        admitted = await client.post(
            "/v2/batch/scrape", json={"urls": [site.url("/page/3")]}, headers=auth(key_b)
        )
        assert admitted.status_code == 200, admitted.text


async def _marker_of(topics: Topics, job_id: str) -> dict[str, Any]:
    [record] = await read_topic(
        topics.bootstrap, topics.requests, count=1, deadline_s=30, key=job_id.encode()
    )
    marker: dict[str, Any] = json.loads(record.value)["metadata"]["firecrawl"]
    return marker


async def test_metadata_over_the_echo_limit_is_refused_at_the_door(
    keyed_gateway: GatewayProcess, site: TestSite
):
    """A crawl whose options echo takes 80 KB is a 400 naming the size; nothing runs."""
    key_a, _ = pair("echo")
    gateway = keyed_gateway
    body = {
        "url": site.url("/"),
        "limit": 2,
        "scrapeOptions": {"actions": [{"type": "executeJavascript", "script": "1" * 80_000}]},
    }
    async with httpx.AsyncClient(base_url=gateway.url, timeout=POLL_TIMEOUT_S) as client:
        answer = await client.post("/v2/crawl", json=body, headers=auth(key_a))
        check = await client.get("/v2/concurrency-check", headers=auth(key_a))
    assert answer.status_code == 400, answer.text
    assert "bytes" in answer.json()["error"]
    assert check.json()["concurrency"] == 0


async def test_a_body_over_the_limit_is_413_before_it_is_read(keyed_gateway: GatewayProcess):
    """27 MB with a valid key (declared length, and chunked) is a 413 in Firecrawl's shape."""
    key_a, _ = pair("body-limit")
    gateway = keyed_gateway
    urls = [f"https://example.com/{n:08d}/{'p' * 60}" for n in range(350_000)]
    body = json.dumps({"urls": urls}).encode()
    assert len(body) > 20 * 2**20

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 2**20):
            yield body[start : start + 2**20]

    headers = auth(key_a) | {"Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
        declared = await client.post("/v2/batch/scrape", content=body, headers=headers)
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
        chunked = await client.post("/v2/batch/scrape", content=chunks(), headers=headers)
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
        assert (await client.get("/healthz")).status_code == 200
    assert [declared.status_code, chunked.status_code] == [413, 413]
    assert declared.json()["success"] is False
    assert "Payload Too Large" in chunked.json()["error"]


async def test_a_large_body_is_parsed_while_the_gateway_answers_others(
    keyed_gateway: GatewayProcess,
):
    """While a 9.5 MiB body (under the limit) is parsed, a `/healthz` sent after its last
    byte is answered first: the event loop is not held by the parse."""
    key_a, _ = pair("large-body")
    gateway = keyed_gateway
    urls = [f"https://example.com/{n:08d}/{'p' * 40}" for n in range(140_000)]
    body = json.dumps({"urls": urls}).encode()
    assert 9 * 2**20 < len(body) < 10 * 2**20
    sent = asyncio.Event()
    order: list[str] = []

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 2**20):
            yield body[start : start + 2**20]
        sent.set()

    async def big(client: httpx.AsyncClient) -> None:
        headers = auth(key_a) | {"Content-Type": "application/json"}
        answer = await client.post("/v2/batch/scrape", content=chunks(), headers=headers)
        order.append(f"big {answer.status_code}")

    async def probe(client: httpx.AsyncClient) -> None:
        await sent.wait()
        answer = await client.get("/healthz")
        order.append(f"healthz {answer.status_code}")

    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=60) as one,
        httpx.AsyncClient(base_url=gateway.url, timeout=60) as other,
    ):
        await asyncio.gather(big(one), probe(other))
    assert order == ["healthz 200", "big 400"]


async def test_one_job_at_a_time_holds_over_two_replicas_and_for_scrapes(
    shared_worker,
    keyed_gateway: GatewayProcess,
    second_replica: GatewayProcess,
    cancelled_after: set[str],
    site: TestSite,
):
    """Ten crawls started at once through two replicas: exactly one is admitted. While it
    runs, a synchronous scrape and a map are 429 too; of eight concurrent scrapes of a slow
    page by B (its limit 1) seven get 429 while the one admitted runs."""
    key_a, key_b = pair("one-job")
    cancelled_after.update({"one-job-a", "one-job-b"})  # the admitted ones' pages are slow
    first, second = keyed_gateway, second_replica
    body = {"url": site.url("/slow?ms=20000"), "limit": 1}
    async with httpx.AsyncClient(timeout=60) as client:
        answers = await asyncio.gather(
            *(
                client.post(f"{g.url}/v2/crawl", json=body, headers=auth(key_a))
                for g in [first, second] * 5
            )
        )
        codes = sorted(a.status_code for a in answers)
        assert codes == [200] + [429] * 9, [a.text for a in answers]
        scrape = await client.post(
            f"{second.url}/v2/scrape", json={"url": site.url("/page/4")}, headers=auth(key_a)
        )
        mapped = await client.post(
            f"{first.url}/v2/map", json={"url": site.url("/")}, headers=auth(key_a)
        )
        assert [scrape.status_code, mapped.status_code] == [429, 429]
        # B's scrapes of a page that answers after 30 s: the seven refused answer while the
        # one admitted still runs, so a second admission cannot hide behind the first's end
        scrapes = [
            asyncio.ensure_future(
                client.post(
                    f"{g.url}/v2/scrape",
                    json={"url": site.url(f"/slow/{n}?ms=30000")},
                    headers=auth(key_b),
                )
            )
            for n, g in enumerate([first, second] * 4)
        ]
        try:
            await until(lambda: sum(s.done() for s in scrapes) >= 7, 60, every_s=0.2)
            answered = [s.result() for s in scrapes if s.done()]
            assert [a.status_code for a in answered] == [429] * 7, [a.text for a in answered]
        finally:
            for scrape in scrapes:
                scrape.cancel()
            await asyncio.gather(*scrapes, return_exceptions=True)
