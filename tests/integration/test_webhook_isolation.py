"""The webhook dispatcher is shared by every tenant: no receiver answer and no record stops it,
nothing signed follows a redirect, one tenant's slow receiver sets no one else's pace, each
tenant's events are signed with its own secret, and no credential of a request or of a
webhook reaches a topic or a log line. Real broker, worker, gateway and `crawlstream
webhooks`; receivers are local servers on loopback.

The tests share one default worker, on topics of the module's own (`shared_worker_with`); the
dispatcher of each is its own, in a group of its own that starts at the end of the progress
topic once the earlier tests' requests have ended (`own_group`), so it sees only the test's
events, as on topics of the test's own. The one that reads every topic and the worker's whole
log has a worker and topics of its own."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING

import httpx
import pytest
from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.partitioner import DefaultPartitioner
from gateway import DispatcherProcess, GatewayProcess, free_port, running_gateway
from harness import read_topic
from listeners import listening
from upstream_proxy import upstream_proxy
from waiting import until
from webhook_receiver import receiving

from service.client import CrawlClient
from service.contracts import CrawlOptions
from service.messaging.metadata import partitions_of
from service.webhooks import verify

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from conftest import SharedRun
    from harness import Topics, WorkerProcess
    from testsite import TestSite
    from webhook_receiver import Receiver

pytestmark = pytest.mark.integration

SHARED_SECRET = "whsec-shared-test-0004"  # noqa: S105 - a test key for local receivers

SLOW_RECEIVER_S = 9.0
"""How long tenant A's receiver takes per event: inside the default 10 s delivery timeout."""


def allowed(site: TestSite, *receivers: Receiver) -> str:
    return ",".join([f"127.0.0.1:{site.port}", *(r.target for r in receivers)])


async def metrics_of(port: int) -> str:
    async with httpx.AsyncClient(timeout=10) as client:
        return (await client.get(f"http://127.0.0.1:{port}/metrics")).text


def value(metrics: str, sample: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


def group_of(env: dict[str, str]) -> str:
    """The dispatcher group of a test: its own, so no other test's dispatcher joins it."""
    return env["CRAWL_PROGRESS_TOPIC"] + "-webhooks"


async def own_group(run: SharedRun) -> str:
    """A dispatcher group of this test's own on the shared worker's progress topic, its offsets
    committed at the topic's end once every request the worker ran for an earlier test has
    ended: its dispatcher reads only this test's events, as one on topics of its own would."""
    seen = run.collector.seen

    def ended(_: object) -> bool:
        return all(
            seen.terminal(request_id) for request_id in {e.request_id for e, _ in seen.events}
        )

    await run.collector.wait_until(ended, 120)
    topics = run.topics
    group = f"{topics.progress}-webhooks-{uuid.uuid4().hex[:8]}"
    consumer = AIOKafkaConsumer(
        bootstrap_servers=topics.bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        partitions = await partitions_of(topics.settings(), topics.progress)
        tps = [TopicPartition(topics.progress, p) for p in partitions]
        consumer.assign(tps)
        await consumer.commit(await consumer.end_offsets(tps))
    finally:
        await consumer.stop()
    return group


async def start_dispatcher(
    env: dict[str, str], tmp_path, name: str = "d1", group: str | None = None
) -> DispatcherProcess:
    """A dispatcher in `group` (by default the one of the test's own topics, `group_of`)."""
    env = env | {"CRAWL_WEBHOOK_GROUP_ID": group or group_of(env)}
    dispatcher = DispatcherProcess(env, tmp_path / f"{name}.log", name)
    await dispatcher.start()
    return dispatcher


def forged_marker(results_offset: int) -> dict[str, object]:
    """A gateway job marker as a producer could write it, naming an offset that is none."""
    return {
        "kind": "crawl",
        "url": "https://example.com/",
        "tenant": "tenant-b",
        "created_at": "2026-12-02T00:00:00Z",
        "results_partition": 0,
        "results_offset": results_offset,
        "formats": ["markdown"],
    }


async def test_a_receiver_answering_404_and_a_forged_marker_do_not_stop_the_dispatcher(
    shared_worker_with: Callable[..., Awaitable[SharedRun]], site: TestSite, tmp_path
):
    """A job whose receiver answers 404 is dropped (counted), a record whose job marker names
    an offset that is none is counted, logged once and skipped; the job after them gets every
    webhook from the same, still running, dispatcher."""
    run = await shared_worker_with()
    topics = run.topics

    async def answer(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404 if request.path == "/gone" else 200)

    async with receiving(answer=answer) as receiver:
        metrics_port = free_port()
        env = topics.env(
            CRAWL_ALLOWED_HOSTS=allowed(site, receiver), CRAWL_METRICS_PORT=str(metrics_port)
        )
        dispatcher = await start_dispatcher(env, tmp_path, group=await own_group(run))
        try:
            async with CrawlClient(topics.settings()) as client:
                url = [site.url("/page/1")]
                gone = await client.submit(url, metadata={"webhook": receiver.url("/gone")})
                forged = await client.submit(
                    url,
                    metadata={"webhook": receiver.url(), "firecrawl": forged_marker(-1)},
                )
                after = await client.submit(url, metadata={"webhook": receiver.url()})
            await until(
                lambda: "crawl.completed" in receiver.types(after.request_id), 120, every_s=0.2
            )
            await until(lambda: len(receiver.of(gone.request_id)) == 3, 60, every_s=0.2)
            metrics = await metrics_of(metrics_port)
            running = dispatcher.process is not None and dispatcher.process.returncode is None
            skipped = [e for e in dispatcher.events() if e.get("event") == "webhooks.skipped"]
        finally:
            await dispatcher.close()
    assert running
    assert receiver.types(after.request_id) == ["crawl.started", "crawl.page", "crawl.completed"]
    assert [d.path for d in receiver.of(gone.request_id)] == ["/gone"] * 3  # 404: not retried
    assert receiver.of(forged.request_id) == []
    assert value(metrics, 'crawl_webhook_events_total{outcome="dropped"}') == 3
    # every event of the forged job is skipped for its marker, each logged once
    assert value(metrics, 'crawl_webhook_records_skipped_total{reason="marker"}') >= 3
    places = [(e["partition"], e["offset"]) for e in skipped if e["reason"] == "marker"]
    assert len(places) == len(set(places)) >= 3


async def test_a_redirecting_receiver_never_reaches_a_forbidden_address(
    shared_worker_with: Callable[..., Awaitable[SharedRun]], site: TestSite, tmp_path
):
    """302, 303, 307 and 308 to loopback addresses outside the allowed hosts (an IPv4, an IPv6
    and an IPv4-mapped IPv6 form): no connection reaches them; each event is dropped once."""
    run = await shared_worker_with()
    topics = run.topics
    async with (
        listening("127.0.0.2") as forbidden4,
        listening("::1") as forbidden6,
    ):
        locations = {
            "/r302": f"http://{forbidden4.target}/stolen",
            "/r303": f"http://{forbidden6.target}/stolen",
            "/r307": f"http://[::ffff:127.0.0.2]:{forbidden4.port}/stolen",
            "/r308": f"http://{forbidden4.target}/stolen",
        }

        async def answer(request: web.Request) -> web.StreamResponse:
            status = int(request.path.removeprefix("/r"))
            return web.Response(status=status, headers={"Location": locations[request.path]})

        async with receiving(answer=answer) as receiver:
            metrics_port = free_port()
            env = topics.env(
                CRAWL_ALLOWED_HOSTS=allowed(site, receiver),
                CRAWL_METRICS_PORT=str(metrics_port),
                CRAWL_WEBHOOK_SECRET=SHARED_SECRET,
            )
            dispatcher = await start_dispatcher(env, tmp_path, group=await own_group(run))
            try:
                async with CrawlClient(topics.settings()) as client:
                    jobs = [
                        await client.submit(
                            [site.url("/page/2")], metadata={"webhook": receiver.url(path)}
                        )
                        for path in locations
                    ]
                done = lambda: all(  # noqa: E731
                    "crawl.completed" in receiver.types(job.request_id) for job in jobs
                )
                await until(done, 120, every_s=0.2)
                dropped = 'crawl_webhook_events_total{outcome="dropped"}'
                await until_metric(metrics_port, dropped, 12)
            finally:
                await dispatcher.close()
    assert forbidden4.counts.total == 0
    assert forbidden6.counts.total == 0
    for job in jobs:  # each event once: a redirect is not retried
        assert receiver.types(job.request_id) == [
            "crawl.started",
            "crawl.page",
            "crawl.completed",
        ]


async def until_metric(port: int, sample: str, expected: float) -> None:
    async with asyncio.timeout(60):
        while value(await metrics_of(port), sample) < expected:
            await asyncio.sleep(0.5)


def same_partition_id(request_id: str, partitions: int = 4) -> str:
    """Another request id whose events land on `request_id`'s progress partition, behind
    its events."""
    partitioner = DefaultPartitioner()
    every = list(range(partitions))
    wanted = partitioner(request_id.encode(), every, every)
    while True:
        candidate = uuid.uuid4().hex
        if partitioner(candidate.encode(), every, every) == wanted:
            return candidate


@pytest.mark.long_running
async def test_a_slow_receiver_of_one_tenant_does_not_delay_another_tenants_events(
    shared_worker_with: Callable[..., Awaitable[SharedRun]], site: TestSite, tmp_path
):
    """Tenant A's receiver takes 9 s an event; tenant B's job, whose events come after all of
    A's on the same partition, is delivered before A's receiver has its last event, and the
    group's committed offset stays at or below A's undelivered event (at least once)."""
    run = await shared_worker_with()
    topics, collector = run.topics, run.collector

    async def slow(_: web.Request) -> web.StreamResponse:
        await asyncio.sleep(SLOW_RECEIVER_S)
        return web.Response(text="ok")

    async with receiving(answer=slow) as receiver_a, receiving("127.0.0.2") as receiver_b:
        env = topics.env(CRAWL_ALLOWED_HOSTS=allowed(site, receiver_a, receiver_b))
        group = await own_group(run)
        dispatcher = await start_dispatcher(env, tmp_path, group=group)
        try:
            async with CrawlClient(topics.settings()) as client:
                job_a = await client.submit(
                    [site.url("/page/3")], metadata={"webhook": receiver_a.url()}
                )
                await collector.wait_until(lambda c: c.terminal(job_a.request_id), 120)
                a_events = await read_topic(
                    topics.bootstrap,
                    topics.progress,
                    len(collector.seen.events_of(job_a.request_id)),
                    30,
                    key=job_a.request_id.encode(),
                )
                job_b = await client.submit(
                    [site.url("/page/4")],
                    request_id=same_partition_id(job_a.request_id),
                    metadata={"webhook": receiver_b.url()},
                )
            await until(
                lambda: "crawl.completed" in receiver_b.types(job_b.request_id), 120, every_s=0.2
            )
            committed = await committed_offsets(topics.bootstrap, group)
            a_when_b_done = receiver_a.types(job_a.request_id)
            await until(
                lambda: "crawl.completed" in receiver_a.types(job_a.request_id), 120, every_s=0.2
            )
        finally:
            await dispatcher.close()
    assert "crawl.completed" not in a_when_b_done
    assert receiver_a.types(job_a.request_id)[-1] == "crawl.completed"
    a_terminal = a_events[-1]
    tp = TopicPartition(topics.progress, a_terminal.partition)
    assert committed.get(tp, -1) <= a_terminal.offset


async def committed_offsets(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        found = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return {tp: meta.offset for tp, meta in found.items()}


def keys_file(tmp_path, secrets: dict[str, str]) -> str:
    path = tmp_path / "keys.json"
    entries = [
        {"key": f"fc-key-of-{tenant}", "tenant": tenant, "webhook_secret": secret}
        for tenant, secret in secrets.items()
    ]
    path.write_text(json.dumps({"keys": entries}))
    return str(path)


async def start_batch(gateway: GatewayProcess, tenant: str, url: str, hook: dict) -> str:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        answer = await client.post(
            "/v2/batch/scrape",
            json={"urls": [url], "webhook": hook},
            headers={"Authorization": f"Bearer fc-key-of-{tenant}"},
        )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


async def test_each_tenants_webhooks_are_signed_with_its_own_secret(
    shared_worker_with: Callable[..., Awaitable[SharedRun]], site: TestSite, tmp_path
):
    """Tenant A aims its job's webhook at tenant B's receiver: B's signature check (with B's
    secret) fails on every delivery; B's own job's deliveries pass it."""
    run = await shared_worker_with()
    topics = run.topics
    secrets = {"tenant-a": "whsec-of-tenant-a-0001", "tenant-b": "whsec-of-tenant-b-0002"}
    async with receiving() as receiver_b:
        env = topics.env(
            CRAWL_ALLOWED_HOSTS=allowed(site, receiver_b),
            CRAWL_GATEWAY_KEYS_FILE=keys_file(tmp_path, secrets),
            CRAWL_WEBHOOK_SEAL_KEY="seal-key-of-this-test-0003",
        )
        dispatcher = await start_dispatcher(env, tmp_path, group=await own_group(run))
        try:
            async with running_gateway(env, tmp_path / "g1.log", "g1") as gateway:
                hook = {"url": receiver_b.url()}
                job_a = await start_batch(gateway, "tenant-a", site.url("/page/5"), hook)
                job_b = await start_batch(gateway, "tenant-b", site.url("/page/6"), hook)
                for job in (job_a, job_b):
                    await until(
                        lambda j=job: "batch_scrape.completed" in receiver_b.types(j),
                        120,
                        every_s=0.2,
                    )
        finally:
            await dispatcher.close()

    def signed_by(job: str, secret: str) -> list[bool]:
        return [
            verify(secret, d.raw, d.headers.get("X-Firecrawl-Signature", ""))
            for d in receiver_b.of(job)
        ]

    assert signed_by(job_a, secrets["tenant-b"]) == [False] * 3
    assert signed_by(job_a, secrets["tenant-a"]) == [True] * 3
    assert signed_by(job_b, secrets["tenant-b"]) == [True] * 3


async def raw_topics(topics: Topics) -> dict[str, bytes]:
    """Every record (key, value, headers) of every topic of the test, read to its end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=topics.bootstrap, enable_auto_commit=False)
    await consumer.start()
    found: dict[str, bytes] = {}
    try:
        names = sorted(t for t in await consumer.topics() if t.startswith(topics.prefix))
        for name in names:
            tps = [TopicPartition(name, p) for p in await partitions_of(topics.settings(), name)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            chunks: list[bytes] = []
            async with asyncio.timeout(60):
                while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        for r in records:
                            chunks += [r.key or b"", r.value or b""]
                            chunks += [v for _, v in r.headers]
            found[name] = b"\n".join(chunks)
    finally:
        await consumer.stop()
    return found


async def produce_raw(topics: Topics, key: str, document: dict[str, object]) -> None:
    """A request record as any producer may write it, without the client's checks."""
    producer = AIOKafkaProducer(bootstrap_servers=topics.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topics.requests, json.dumps(document).encode(), key.encode())
    finally:
        await producer.stop()


async def test_no_credential_of_a_request_or_a_webhook_reaches_a_topic_or_a_log(
    topics: Topics, start_worker, site: TestSite, tmp_path
):
    """A crawl through the gateway with an upstream proxy's password, a page header, a webhook
    header and a token in the webhook's URL; a Kafka producer's request with a proxy password
    and a plain `metadata.webhook` carrying a header and a token; a producer's invalid request
    carrying all of them (a dead letter): each receiver gets its header and token, and none of
    the secrets appears in any topic (the proxy's password and page header only in the
    requests and the page tasks, which carry them to the fetcher; a producer's own webhook
    only in its request) or in any log line of the gateway, the dispatcher or the worker."""
    proxy_password = "proxy-pass-5d1f"  # noqa: S105 - a test credential
    page_header = "page-hdr-77c2"
    hook_header = "hook-hdr-0b9e"
    hook_token = "hook-tok-a41c"  # noqa: S105
    producer_header = "prod-hdr-39d0"
    producer_token = "prod-tok-e27b"  # noqa: S105
    async with (
        receiving() as receiver,
        upstream_proxy("127.0.0.1", "crawler", proxy_password) as proxy,
    ):
        hosts = f"{allowed(site, receiver)},127.0.0.1:{proxy.port}"
        env = topics.env(CRAWL_ALLOWED_HOSTS=hosts, CRAWL_WEBHOOK_SECRET=SHARED_SECRET)
        worker: WorkerProcess = await start_worker(
            CRAWL_ALLOWED_HOSTS=hosts, CRAWL_WEBHOOK_SECRET=SHARED_SECRET
        )
        dispatcher = await start_dispatcher(env, tmp_path)
        producer_hook = {
            "url": receiver.url(f"/producer?token={producer_token}"),
            "headers": {"X-Hook-Key": producer_header},
        }
        try:
            async with (
                running_gateway(env, tmp_path / "g1.log", "g1") as gateway,
                httpx.AsyncClient(base_url=gateway.url, timeout=30) as client,
            ):
                answer = await client.post(
                    "/v2/crawl",
                    json={
                        "url": site.url("/page/7"),
                        "limit": 1,
                        "scrapeOptions": {
                            "proxy": proxy.url(),
                            "headers": {"X-Page-Key": page_header},
                        },
                        "webhook": {
                            "url": receiver.url(f"/hook?token={hook_token}"),
                            "headers": {"X-Hook-Key": hook_header},
                        },
                    },
                )
                assert answer.status_code == 200, answer.text
                job = answer.json()["id"]
                async with CrawlClient(topics.settings()) as producer:
                    own = await producer.submit(
                        [site.url("/page/8")],
                        CrawlOptions(proxy=proxy.url(), headers={"X-Page-Key": page_header}),
                        metadata={"webhook": producer_hook},
                    )
                invalid = f"dl-{uuid.uuid4().hex[:8]}"
                await produce_raw(
                    topics,
                    invalid,
                    {
                        "request_id": invalid,
                        "urls": [site.url("/page/9")],
                        "options": {
                            "timeout_ms": 5,
                            "proxy": proxy.url(),
                            "headers": {"X-Page-Key": page_header},
                        },
                        "metadata": {"webhook": producer_hook},
                    },
                )
                for done, key in (("crawl.completed", job), ("crawl.completed", own.request_id)):
                    await until(lambda d=done, k=key: d in receiver.types(k), 120, every_s=0.2)
                status = (await client.get(f"/v2/crawl/{job}")).json()
            letters = await read_topic(topics.bootstrap, topics.dead_letter, 1, 60)
            found = await raw_topics(topics)
        finally:
            await dispatcher.close()
    assert status["status"] == "completed"
    for key, header, token in (
        (job, hook_header, hook_token),
        (own.request_id, producer_header, producer_token),
    ):
        assert all(d.headers.get("X-Hook-Key") == header for d in receiver.of(key))
        assert all(d.query == f"token={token}" for d in receiver.of(key))
    assert [letter.key for letter in letters] == [invalid.encode()]
    assert b"[redacted]" in letters[0].value
    carried = {
        topics.requests: {proxy_password, page_header, producer_header, producer_token},
        topics.pages: {proxy_password, page_header},
    }
    secrets = [proxy_password, page_header, hook_header, hook_token, producer_header]
    assert_nowhere([*secrets, producer_token], found, carried)
    assert {topics.progress, topics.results, topics.dead_letter} <= set(found)
    for log in (gateway.log_path, dispatcher.log_path, worker.log_path):
        text = log.read_text(errors="replace")
        assert text  # the process did log
        for secret in [*secrets, producer_token]:
            assert secret not in text, f"{secret} in {log.name}"


def assert_nowhere(
    secrets: list[str], found: dict[str, bytes], carried: dict[str, set[str]]
) -> None:
    """No secret in any topic's records but the ones `carried` allows there."""
    for name, raw in found.items():
        for secret in secrets:
            if secret not in carried.get(name, set()):
                assert secret.encode() not in raw, f"{secret} in topic {name}"
