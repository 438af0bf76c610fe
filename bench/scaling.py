"""Do replicas add up when the page is the unit of work? 1, 2 and 3 workers, in one run.

    .venv/bin/python bench/scaling.py [--replicas 1,2,3] [--scenarios abcd]
        [--a-urls 100] [--a-hosts 25] [--a-ms 1000]
        [--b-requests 48] [--b-urls 20] [--b-hosts 12] [--b-ms 500]
        [--c-pages 300] [--c-hosts 10] [--c-ms 500]
        [--d-requests 12] [--d-urls 10] [--d-ms 500]

One broker (LocalBroker) and the test site on every loopback address at one port
(tests/support/hostsite.py: 127.0.0.2, 127.0.0.3, ... are hosts of their own, each allowed by
`CRAWL_ALLOWED_HOSTS` as `host:port`), counting the requests it answers at once per host. For
each replica count: fresh topics (12 request, 12 page and 12 output partitions) and groups,
that many `crawlstream worker` processes (`CRAWL_ROLE=all`), and production only once both
groups are stable: the workers' `consumer.assigned` log events show that together they own
every request partition once (`"consumer": "request"`) and every page partition once
(`"page"`), and each worker's governor is at its page ceiling (`crawl_concurrency_limit` at
`CRAWL_MAX_PAGE_SLOTS`), so no rebalance or slow start is timed. Every page is `render: http`
(so the two cores are not the bound: each page waits on the server). The scenarios run one
after the other on the same workers, each timed from its first request produced to its last
terminal event read:

(a) one request of `--a-urls` unique `/slow/{key}?ms=` pages spread round-robin over
    `--a-hosts` hosts (target: 3 workers >= 2.7x one);
(b) `--b-requests` requests with random IDs (uuid4) of `--b-urls` pages each, spread over
    `--b-hosts` hosts (target >= 2.7x);
(c) a deep crawl: one request seeded with one mesh page on each of `--c-hosts` hosts, `crawl`
    {max_pages: `--c-pages`, max_depth: 5, scope: host}; the mesh (hostsite.py) links every
    page to pages on other hosts, and `host` scope admits the host of any seed, so the crawl
    covers all of them (target >= 2.5x);
(d) with the most replicas only: `--d-requests` requests of `--d-urls` pages, all on one host;
    the most pages the site answered at once for that host (target: `CRAWL_MAX_PAGES_PER_HOST`).

Settings are the service's defaults (8 page slots and 4 pages per host per worker) except the
partition counts, set to 12 explicitly (the defaults too, but the harness uses 4 for tests),
and `CRAWL_LOG_LEVEL=info` (the `consumer.assigned` events the stability check reads). The
"host peak" column is the same site-side count for (a)-(c). Pages are keyed by host, so how
evenly the hosts hash over the page partitions (printed) bounds (a)-(c) with 3 workers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Final

import aiohttp
from _common import ROOT, Stopwatch
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from harness import Collector, Topics, WorkerProcess, collecting
from hostsite import HostSite, host_address, serve_hosts

from service.broker import LocalBroker
from service.contracts import CrawlOptions, CrawlRequest, CrawlSpec, dump_request
from service.messaging.reader import PartitionSpan
from service.messaging.topics import ensure_topics, partition_for
from service.settings import Settings
from service.worker.coordinator.placement import Placement

PARTITIONS: Final = 12
"""Request, page and output partitions (the service's defaults)."""

DEFAULTS: Final = Settings()
SLOTS: Final = DEFAULTS.max_page_slots
PER_HOST: Final = DEFAULTS.max_pages_per_host

HOSTS: Final = 40
"""Hosts allowed: (a)-(c) use the first ones, (d) the last."""
D_HOST: Final = HOSTS - 1

GROUP_DEADLINE_S: Final = 120.0
RUN_DEADLINE_S: Final = 900.0
POLL_S: Final = 0.2

TARGETS: Final = {"a": 2.7, "b": 2.7, "c": 2.5}
TITLES: Final = {
    "a": "one request over many hosts",
    "b": "requests with random IDs",
    "c": "deep crawl over hosts",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    scenario: str
    replicas: int
    pages: int
    seconds: float
    by_worker: dict[str, int]
    host_peak: int

    @property
    def rate(self) -> float:
        return self.pages / self.seconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _concurrency(port: int) -> float:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        text = await response.text()
    found = re.search(r"^crawl_concurrency_limit (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def assigned(worker: WorkerProcess, consumer: str) -> set[int]:
    """The partitions `worker`'s `consumer` ("request" or "page") owns by its log."""
    owned: set[int] = set()
    for entry in worker.events():
        if entry.get("consumer") != consumer:
            continue
        if entry.get("event") == "consumer.assigned":
            owned = set(entry["partitions"])
        elif entry.get("event") == "consumer.revoked":
            owned -= set(entry["partitions"])
    return owned


def _split(owned: list[set[int]]) -> bool:
    """Every member owns some partitions, and together they own each partition once."""
    return all(owned) and sum(map(len, owned)) == len(set().union(*owned)) == PARTITIONS


async def wait_stable(workers: list[WorkerProcess], ports: list[int]) -> None:
    """Until both groups are split over the workers and each governor is at its ceiling."""
    async with asyncio.timeout(GROUP_DEADLINE_S):
        while True:
            split = all(
                _split([assigned(worker, consumer) for worker in workers])
                for consumer in ("request", "page")
            )
            if split:
                limits = [await _concurrency(port) for port in ports]
                if min(limits) >= SLOTS:
                    return
            await asyncio.sleep(POLL_S)


def scenario_requests(
    name: str, site: HostSite, args: argparse.Namespace, tag: str
) -> list[CrawlRequest]:
    """The requests of scenario `name`; `tag` keeps its page URLs unique to this run."""
    http = CrawlOptions(render="http")

    def slow(n: int, key: str, ms: int) -> str:
        return f"{site.origin(n)}/slow/{tag}-{key}?ms={ms}"

    if name == "a":
        urls = [slow(i % args.a_hosts, f"a{i}", args.a_ms) for i in range(args.a_urls)]
        return [CrawlRequest(request_id=f"{tag}-a", urls=urls, options=http)]
    if name == "b":
        requests = []
        for r in range(args.b_requests):
            rid = str(uuid.uuid4())
            urls = [
                slow((r * args.b_urls + i) % args.b_hosts, f"b{r}-{i}", args.b_ms)
                for i in range(args.b_urls)
            ]
            requests.append(CrawlRequest(request_id=rid, urls=urls, options=http))
        return requests
    if name == "c":
        crawl = CrawlSpec(max_pages=args.c_pages, max_depth=5, scope="host")
        seeds = site.mesh_seeds(args.c_pages, args.c_hosts, args.c_ms)
        return [CrawlRequest(request_id=f"{tag}-c", urls=seeds, options=http, crawl=crawl)]
    return [
        CrawlRequest(
            request_id=f"{tag}-d{r}",
            urls=[slow(D_HOST, f"d{r}-{i}", args.d_ms) for i in range(args.d_urls)],
            options=http,
        )
        for r in range(args.d_requests)
    ]


async def run_scenario(
    name: str,
    replicas: int,
    topics: Topics,
    site: HostSite,
    collector: Collector,
    args: argparse.Namespace,
) -> Figures:
    requests = scenario_requests(name, site, args, f"{topics.prefix}{name}")
    ids = {request.request_id for request in requests}
    site.load.reset()
    with Stopwatch() as watch:
        await produce_all(topics, requests)
        await collector.wait_until(
            lambda seen: all(seen.terminal(rid) for rid in ids), deadline_s=RUN_DEADLINE_S
        )
    results = [result for result, _ in collector.seen.results if result.request_id in ids]
    failed = [result for result in results if not result.ok]
    if failed:
        print(f"  ({name}, {replicas} workers: {len(failed)} failed pages, e.g. {failed[0].error})")
    figures = Figures(
        scenario=name,
        replicas=replicas,
        pages=len(results),
        seconds=watch.seconds,
        by_worker=dict(sorted(Counter(result.worker for result in results).items())),
        host_peak=site.load.top()[1],
    )
    print(f"  {figures}", file=sys.stderr, flush=True)
    return figures


async def measure(
    bootstrap: str, site: HostSite, replicas: int, args: argparse.Namespace
) -> list[Figures]:
    partitions = str(PARTITIONS)
    topics = Topics(
        bootstrap=bootstrap,
        extra_env={
            "CRAWL_ALLOWED_HOSTS": site.allowed_hosts(HOSTS),
            "CRAWL_REQUESTS_PARTITIONS": partitions,
            "CRAWL_OUTPUT_PARTITIONS": partitions,
            "CRAWL_PAGE_PARTITIONS": partitions,
            "CRAWL_ROLE": "all",
            "CRAWL_LOG_LEVEL": "info",
            "CRAWL_HOST_PLACEMENT": args.placement,
        },
    )
    await ensure_topics(
        topics.settings(
            requests_partitions=PARTITIONS,
            output_partitions=PARTITIONS,
            page_partitions=PARTITIONS,
        )
    )
    ports = [_free_port() for _ in range(replicas)]
    log_dir = ROOT / ".bench"
    log_dir.mkdir(exist_ok=True)
    workers = [
        WorkerProcess(
            topics.env(CRAWL_METRICS_PORT=str(port)),
            log_dir / f"{topics.prefix}-w{i}.log",
            f"w{i}",
        )
        for i, port in enumerate(ports)
    ]
    figures = []
    try:
        await asyncio.gather(*(worker.start() for worker in workers))
        await wait_stable(workers, ports)
        async with collecting(topics) as collector:
            for name in args.scenarios:
                if name == "d" and replicas != max(args.counts):
                    continue
                figures.append(await run_scenario(name, replicas, topics, site, collector, args))
        PLACED[replicas] = await placed(topics) if args.placement == "directory" else {}
    finally:
        for worker in workers:
            with contextlib.suppress(Exception):
                await worker.terminate()
            await worker.close()
        print(f"  {replicas} workers: logs in {log_dir}/{topics.prefix}-w*.log")
    return figures


async def produce_all(topics: Topics, requests: list[CrawlRequest]) -> None:
    """Send every request at once (acks=all) and wait for all acknowledgements together."""
    producer = AIOKafkaProducer(bootstrap_servers=topics.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = [
            await producer.send(
                topics.requests, dump_request(request), key=request.request_id.encode()
            )
            for request in requests
        ]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


PLACED: dict[int, dict[str, int]] = {}
"""Replica count -> the host directory as its run left it (page key -> partition)."""


async def placed(topics: Topics) -> dict[str, int]:
    """The host directory's placements (the first record of each key)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=topics.bootstrap)
    await consumer.start()
    try:
        span = await PartitionSpan.seek(consumer, [TopicPartition(topics.hosts, 0)])
        found: dict[str, int] = {}
        async for record in span.records():
            partition = Placement.model_validate_json(record.value).partition
            found.setdefault(record.key.decode(), partition)
        return found
    finally:
        await consumer.stop()


def host_spread(hosts: int, placements: dict[str, int] | None) -> list[int]:
    """Hosts per page partition (the page key is the host name), most loaded first: as the
    directory placed them, or (`--placement hash`) as they hash."""
    names = [host_address(n) for n in range(hosts)]
    counts = Counter(
        placements[name] if placements else partition_for(name, PARTITIONS)
        for name in names
        if not placements or name in placements
    )
    return sorted((counts.get(p, 0) for p in range(PARTITIONS)), reverse=True)


def report(args: argparse.Namespace, figures: list[Figures], started: str) -> None:
    print(f"{started}, {os.cpu_count()} cores; render http; {PARTITIONS} request and page")
    print(f"partitions; defaults: {SLOTS} page slots, {PER_HOST} pages per host per worker")
    print(f"(a) 1 request x {args.a_urls} pages of {args.a_ms} ms over {args.a_hosts} hosts")
    print(f"(b) {args.b_requests} requests (uuid4) x {args.b_urls} pages of {args.b_ms} ms", end="")
    print(f" over {args.b_hosts} hosts")
    print(f"(c) deep crawl, max_pages {args.c_pages}, {args.c_hosts} hosts, {args.c_ms} ms pages")
    placements = PLACED.get(max(args.counts))
    how = f"placed by the directory, {max(args.counts)} workers" if placements else "hashed"
    for name, hosts in (("a", args.a_hosts), ("b", args.b_hosts), ("c", args.c_hosts)):
        print(f"    hosts per page partition ({name}, {how}): {host_spread(hosts, placements)}")
    print(
        f"{'':<4}{'replicas':>9}{'pages':>7}{'seconds':>9}{'pages/s':>9}{'x one':>7}"
        f"{'host peak':>10}  pages per worker"
    )
    for name in "abc":
        runs = [f for f in figures if f.scenario == name]
        if not runs:
            continue
        one = runs[0].rate
        for run in runs:
            ratio = f"{run.rate / one:.2f}"
            last = run.replicas == max(args.counts) and run is not runs[0]
            target = f"  (target >= {TARGETS[name]})" if last else ""
            print(
                f"({name}){run.replicas:>9}{run.pages:>7}{run.seconds:>9.2f}{run.rate:>9.2f}"
                f"{ratio:>7}{run.host_peak:>10}  {run.by_worker}{target}"
            )
    for run in (f for f in figures if f.scenario == "d"):
        print(
            f"(d) {run.replicas} workers, {args.d_requests} requests x {args.d_urls} pages on one"
            f" host: at most {run.host_peak} pages at once at the site (target: {PER_HOST});"
            f" {run.seconds:.2f} s, pages per worker {run.by_worker}"
        )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", default="1,2,3")
    parser.add_argument("--scenarios", default="abcd")
    parser.add_argument("--placement", choices=("directory", "hash"), default="directory")
    for name, value in (
        ("a-urls", 100),
        ("a-hosts", 25),
        ("a-ms", 1000),
        ("b-requests", 48),
        ("b-urls", 20),
        ("b-hosts", 12),
        ("b-ms", 500),
        ("c-pages", 300),
        ("c-hosts", 10),
        ("c-ms", 500),
        ("d-requests", 12),
        ("d-urls", 10),
        ("d-ms", 500),
    ):
        parser.add_argument(f"--{name}", type=int, default=value)
    args = parser.parse_args()
    args.counts = [int(value) for value in args.replicas.split(",")]
    if max(args.a_hosts, args.b_hosts, args.c_hosts) >= D_HOST:
        parser.error(f"at most {D_HOST - 1} hosts")
    return args


async def main() -> None:
    args = parse()
    started = time.strftime("%Y-%m-%d %H:%M")
    figures: list[Figures] = []
    async with serve_hosts() as site, LocalBroker() as broker:
        for replicas in args.counts:
            figures += await measure(broker.bootstrap_servers, site, replicas, args)
    report(args, figures, started)


if __name__ == "__main__":
    asyncio.run(main())
