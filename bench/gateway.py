"""The gateway's costs, side by side in one run.

    .venv/bin/python bench/gateway.py [--samples 30] [--pages 10000] [--seconds 10]
        [--only fairness]

(a) Scrape latency: one `crawlstream worker` process, one URL at a time, alternately
    through a Kafka client (`CrawlClient.crawl`: produce, follow the output topics) and
    through a `crawlstream gateway` process (`POST /v2/scrape`, httpx). Prints p50 and p95 of
    each and the gateway's p50 minus the client's (target: at most +20 ms).
(b) Status polls: a job of `--pages` pages written to the topics as a worker would (its
    request record, `accepted`, one result and one page event per page), the worker stopped
    first so nothing else runs; then `GET /v2/crawl/{id}` (status and the first `data` page of
    100 documents) from 8 concurrent callers for `--seconds` against one replica: polls per
    second. Also the time to page through all documents by `next`.
(c) Tenant fairness: a replica with a keys file (tenants A and B). A's poll of its own
    200-page crawl (status + first 100 documents), one at a time, for `--seconds` alone; then
    again while B floods the same replica for `--seconds`: 40 concurrent polls of B's 300-page
    crawl of 100 KB documents (10 MB a page), 4 WebSocket watchers catching up on it, and
    9.5 MiB bodies of URLs. Prints A's p50 and p99 alone and under the flood, the ratio of the
    p99s (target: within 2x) and the replica's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from _common import ROOT
from aiokafka import AIOKafkaProducer
from gateway import GatewayProcess
from harness import Topics, WorkerProcess, wait_for_leaders
from testsite import serve

from service.broker import LocalBroker
from service.client import CrawlClient
from service.contracts import (
    CrawlOptions,
    CrawlRequest,
    EventType,
    Format,
    PageResult,
    ProgressEvent,
    dump,
    dump_request,
)
from service.gateway.jobs import MARKER_KEY, JobMarker
from service.messaging.topics import ensure_topics
from service.sealing.marker_auth import sealed

if TYPE_CHECKING:
    from service.settings import Settings

WARMUP = 5
"""Samples of each path measured first and left out (browser and JIT warm-up)."""

POLLERS = 8
"""Concurrent callers of the status endpoint."""

MARKDOWN_BYTES = 2000
"""Markdown per synthetic page (documents of the poll benchmark)."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RuntimeError(message)


def quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


async def latency(topics: Topics, gateway: GatewayProcess, url: str, samples: int) -> None:
    client_s: list[float] = []
    gateway_s: list[float] = []
    options = CrawlOptions(formats=(Format.MARKDOWN, Format.METADATA))
    async with CrawlClient(topics.settings()) as client, httpx.AsyncClient(timeout=60) as http:
        for n in range(WARMUP + samples):
            started = time.perf_counter()
            [result] = await client.crawl([url], options, timeout_s=60)
            took = time.perf_counter() - started
            _check(result.ok, f"the client's scrape failed: {result.error}")
            if n >= WARMUP:
                client_s.append(took)
            started = time.perf_counter()
            answer = await http.post(
                f"{gateway.url}/v2/scrape", json={"url": url, "formats": ["markdown"]}
            )
            took = time.perf_counter() - started
            _check(answer.status_code == 200, f"the gateway's scrape failed: {answer.text}")
            if n >= WARMUP:
                gateway_s.append(took)
    (c50, c95), (g50, g95) = quantiles(client_s), quantiles(gateway_s)
    print(f"scrape, 1 URL, {samples} samples each (after {WARMUP} warm-up)")
    print(f"  Kafka client (CrawlClient.crawl)  p50 {c50:7.1f} ms   p95 {c95:7.1f} ms")
    print(f"  gateway POST /v2/scrape           p50 {g50:7.1f} ms   p95 {g95:7.1f} ms")
    print(f"  gateway - client                  p50 {g50 - c50:+7.1f} ms  (target <= +20 ms)")


BENCH_SECRET = "bench-gateway-secret"  # noqa: S105 - a benchmark's own replicas
"""`CRAWL_GATEWAY_SECRET` of the benchmark's replicas: the synthetic jobs' markers are signed
with it, as the gateway signs its own."""

FLOOD_POLLERS = 40
FLOOD_WATCHERS = 4
FLOOD_BODY_URLS = 140_000
"""B's flood: concurrent polls, WebSocket watchers, and URLs per large body (~9.5 MiB)."""


async def synthetic_job(
    topics: Topics,
    pages: int,
    *,
    tenant: str = "open",
    markdown_bytes: int = MARKDOWN_BYTES,
) -> str:
    """A running crawl of `pages` pages, written as a worker and the gateway would."""
    settings = topics.settings()
    job_id = str(uuid.uuid4())
    async with CrawlClient(settings) as client:
        partition, offset = (await client.output_positions(job_id))[settings.results_topic]
    marker = JobMarker(
        kind="crawl",
        url="https://example.com/",
        tenant=tenant,
        created_at=datetime.now(tz=UTC),
        results_partition=partition,
        results_offset=offset,
        formats=("markdown",),
    )
    signed = sealed(BENCH_SECRET.encode(), job_id, marker.model_dump(mode="json"))
    metadata = {MARKER_KEY: signed}
    producer = AIOKafkaProducer(
        bootstrap_servers=topics.bootstrap, linger_ms=20, max_request_size=4 * 2**20
    )
    await producer.start()
    try:
        request = CrawlRequest(request_id=job_id, urls=["https://example.com/"], metadata=metadata)
        await producer.send(settings.requests_topic, dump_request(request), key=job_id.encode())
        await _write_pages(producer, settings, job_id, metadata, pages, markdown_bytes)
        await producer.flush()
    finally:
        await producer.stop()
    return job_id


async def _write_pages(
    producer: AIOKafkaProducer,
    settings: Settings,
    job_id: str,
    metadata: dict,
    pages: int,
    markdown_bytes: int,
) -> None:
    now = datetime.now(tz=UTC)
    key = job_id.encode()

    def event(seq: int, kind: EventType, done: int) -> bytes:
        return dump(
            ProgressEvent(
                request_id=job_id, run_id="r1", seq=seq, type=kind, total=pages,
                succeeded=done, failed=0, at=now, worker="bench", request_metadata=metadata,
            )
        )  # fmt: skip

    await producer.send(settings.progress_topic, event(0, EventType.ACCEPTED, 0), key=key)
    for n in range(pages):
        url = f"https://example.com/p/{n}"
        result = PageResult(
            request_id=job_id, result_id=f"{n:032x}", run_id="r1", url=url, ok=True,
            status_code=200, markdown="x" * markdown_bytes, elapsed_ms=1, fetched_at=now,
            worker="bench", request_metadata=metadata,
        )  # fmt: skip
        await producer.send(settings.results_topic, dump(result), key=key)
        await producer.send(
            settings.progress_topic, event(n + 1, EventType.PAGE_SUCCEEDED, n + 1), key=key
        )


async def polls(gateway: GatewayProcess, job_id: str, pages: int, seconds: float) -> None:
    url = f"{gateway.url}/v2/crawl/{job_id}"
    async with httpx.AsyncClient(timeout=30) as http:
        async with asyncio.timeout(120):
            while (await http.get(url)).json().get("completed") != pages:  # noqa: ASYNC110
                await asyncio.sleep(0.5)
        count = 0
        end = time.perf_counter() + seconds

        async def poller() -> None:
            nonlocal count
            while time.perf_counter() < end:
                answer = await http.get(url)
                _check(len(answer.json()["data"]) == 100, f"a poll answered {answer.text[:200]}")
                count += 1

        started = time.perf_counter()
        await asyncio.gather(*(poller() for _ in range(POLLERS)))
        rate = count / (time.perf_counter() - started)
        started = time.perf_counter()
        documents, following = 0, url
        while following:
            body = (await http.get(following)).json()
            documents += len(body["data"])
            following = body["next"] if body["data"] else None
        walked = time.perf_counter() - started
    print(f"status polls, one replica, a {pages:,}-page crawl, {POLLERS} concurrent callers")
    print(f"  GET /v2/crawl/{{id}} (status + first 100 documents)   {rate:7.1f} polls/s")
    print(f"  paging through all {documents:,} documents by next    {walked:7.2f} s")


async def _poll_times(
    http: httpx.AsyncClient, url: str, key: str, seconds: float, documents: int
) -> list[float]:
    """A's polls, one at a time, for `seconds`: each one's time."""
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started = time.perf_counter()
        answer = await http.get(url, headers={"Authorization": f"Bearer {key}"})
        times.append(time.perf_counter() - started)
        _check(len(answer.json()["data"]) == documents, f"A's poll answered {answer.text[:200]}")
    return times


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1000


async def _flooding(port: int, job_b: str, key: str) -> None:
    """B's flood in a process of its own (`--flood`), as another tenant's client would be: its
    own event loop, so reading B's 10 MB answers does not delay A's client. It stops when its
    standard input closes and prints what it managed as one JSON line."""
    stop = asyncio.Event()
    done = {"polls": 0, "watchers": 0, "bodies": 0, "refused": 0}
    flood = asyncio.create_task(_flood(port, job_b, key, stop, done))
    while not any(done.values()):  # noqa: ASYNC110 - the first of B's calls answered
        await asyncio.sleep(0.1)
    print("flooding", flush=True)
    await asyncio.to_thread(sys.stdin.read)
    stop.set()
    _, pending = await asyncio.wait([flood], timeout=FLOOD_STOP_S)
    for task in pending:  # calls still in flight are dropped, not waited for
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    print(json.dumps(done), flush=True)


FLOOD_STOP_S = 5.0
"""How long B's flood may take to end its calls in flight once told to stop."""


async def _flood(port: int, job_b: str, key: str, stop: asyncio.Event, done: dict) -> None:
    """B's polls, watchers and large bodies until `stop`, counted in `done`."""
    import websockets  # noqa: PLC0415 - only this part of the benchmark needs it

    headers = {"Authorization": f"Bearer {key}"}
    body = _large_body()
    base = f"http://127.0.0.1:{port}"

    async def poller(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            answer = await http.get(f"{base}/v2/crawl/{job_b}", headers=headers)
            done["polls" if answer.status_code == 200 else "refused"] += 1

    async def watcher() -> None:
        url = f"ws://127.0.0.1:{port}/v2/crawl/{job_b}"
        while not stop.is_set():
            async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
                while not stop.is_set():
                    try:
                        message = await asyncio.wait_for(ws.recv(), 1)
                    except TimeoutError:
                        continue
                    if '"type":"catchup"' in str(message)[:40]:
                        done["watchers"] += 1
                        break

    async def sender(http: httpx.AsyncClient) -> None:
        while not stop.is_set():
            answer = await http.post(
                f"{base}/v2/batch/scrape",
                content=body,
                headers=headers | {"Content-Type": "application/json"},
            )
            done["bodies"] += 1 if answer.status_code in {400, 413} else 0

    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=100)) as http:
        await asyncio.gather(
            *(poller(http) for _ in range(FLOOD_POLLERS)),
            *(watcher() for _ in range(FLOOD_WATCHERS)),
            sender(http),
        )


def _large_body() -> bytes:
    urls = [f"https://example.com/{n:08d}/{'p' * 40}" for n in range(FLOOD_BODY_URLS)]
    return json.dumps({"urls": urls}).encode()


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def fairness(topics: Topics, logs: Path, seconds: float) -> None:
    keys = logs / f"{topics.prefix}-keys.json"
    entries = [{"key": "fc-bench-a-key", "tenant": "a"}, {"key": "fc-bench-b-key", "tenant": "b"}]
    keys.write_text(json.dumps({"keys": entries}))
    env = topics.env(CRAWL_GATEWAY_KEYS_FILE=str(keys), CRAWL_GATEWAY_SECRET=BENCH_SECRET)
    gateway = GatewayProcess(env, Path(logs / f"{topics.prefix}-g2.log"), "g2")
    await gateway.start()
    try:
        job_a = await synthetic_job(topics, 200, tenant="a")
        job_b = await synthetic_job(topics, 300, tenant="b", markdown_bytes=100_000)
        url_a = f"{gateway.url}/v2/crawl/{job_a}"
        async with httpx.AsyncClient(timeout=120) as http:
            async with asyncio.timeout(120):
                while (  # noqa: ASYNC110
                    await http.get(url_a, headers={"Authorization": "Bearer fc-bench-a-key"})
                ).json().get("completed") != 200:
                    await asyncio.sleep(0.5)
            alone = await _poll_times(http, url_a, "fc-bench-a-key", seconds, 100)
            flood = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--flood", str(gateway.port), job_b, "fc-bench-b-key",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _check(flood.stdout is not None, "the flood's output is not piped")
            await asyncio.wait_for(flood.stdout.readline(), 120)  # type: ignore[union-attr]
            await asyncio.sleep(2)  # the flood in full swing
            flooded = await _poll_times(http, url_a, "fc-bench-a-key", seconds, 100)
            out, _ = await asyncio.wait_for(flood.communicate(b""), 120)  # EOF: stop
            done = json.loads(out.decode().strip().splitlines()[-1])
        _check(gateway.process is not None, "the replica has no process")
        peak = _rss_mib(gateway.process.pid)  # type: ignore[union-attr]
    finally:
        await gateway.close()
    (a50, _), (f50, _) = quantiles(alone), quantiles(flooded)
    a99, f99 = _p99(alone), _p99(flooded)
    print("tenant fairness, one replica: A polls its 200-page crawl one at a time")
    for name, times, p50, p99 in (
        ("alone", alone, a50, a99),
        ("while B floods", flooded, f50, f99),
    ):
        print(f"  A {name:<20} {len(times):5d} polls  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms")
    print(
        f"  B's flood: {done['polls']} polls of 10 MB pages ({done['refused']} refused 429), "
        f"{done['watchers']} watcher catch-ups, {done['bodies']} 9.5 MiB bodies"
    )
    print(f"  A's p99 under the flood / alone  {f99 / a99:5.2f}x  (target <= 2x)")
    print(f"  the replica's peak RSS            {peak:7.0f} MiB")


async def main(samples: int, pages: int, seconds: float, only: str | None = None) -> None:
    logs = ROOT / ".bench"
    logs.mkdir(exist_ok=True)
    async with LocalBroker() as broker, serve() as site:
        topics = Topics(
            bootstrap=broker.bootstrap_servers,
            extra_env={"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site.port}"},
        )
        await ensure_topics(topics.settings())
        await wait_for_leaders(topics)
        worker = WorkerProcess(topics.env(), Path(logs / f"{topics.prefix}-w1.log"), "w1")
        gateway = GatewayProcess(topics.env(), Path(logs / f"{topics.prefix}-g1.log"), "g1")
        await worker.start()
        await gateway.start()
        try:
            if only is None:
                await latency(topics, gateway, site.url("/page/7"), samples)
            await worker.terminate()
            if only is None:
                job_id = await synthetic_job(topics, pages)
                await polls(gateway, job_id, pages, seconds)
            await fairness(topics, logs, seconds)
        finally:
            await gateway.close()
            await worker.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--only", choices=["fairness"], default=None)
    parser.add_argument("--flood", nargs=3, metavar=("PORT", "JOB", "KEY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.flood:
        port, job, key = args.flood
        asyncio.run(_flooding(int(port), job, key))
    else:
        asyncio.run(main(args.samples, args.pages, args.seconds, args.only))
