"""Do replicas add up? 1, 2 and 3 workers in one group on a latency-bound site, in one run.

    .venv/bin/python bench/scaling.py [--requests 24] [--urls 10] [--page-ms 500]
        [--replicas 1,2,3] [--cpu-pages 80]

One broker (LocalBroker), the local test site. For each replica count: fresh topics (12
request partitions, the service's default) and group, that many `crawlstream worker`
processes, and `--requests` requests of `--urls` unique `/slow/{key}?ms=page-ms` pages each
with `render: http` (so the two cores are not the bound: each page waits on the server).
Production starts only once the group is stable: every worker's log shows its assignment,
together they own every partition once, and each worker's governor has reached its page
ceiling (its `crawl_concurrency_limit` metric), so no rebalance or slow start is timed.
Timed from the first request produced to the last terminal event read; "start s" is from
the first request produced to the first page starting (results' `fetched_at - elapsed_ms`),
"end s" from the last page done to the last terminal event read (produce, intake and the
output path: the part of a run that does not shrink with more replicas).

Request IDs are chosen so that the requests spread evenly over the request partitions
(`--requests` / 12 per partition): with 24 arbitrary IDs murmur2 puts 0 to 5 requests on a
partition, so one replica may own twice the pages of another and the run measures the hash's
luck, not the service. The spread of plain IDs (`{prefix}-{n}`) is printed beside it.

Then the browser path's CPU per page: one worker, `render: browser`, `--cpu-pages` of the same
pages; CPU = utime + stime of the worker and every process under it (Chromium), plus what its
exited children left in cutime + cstime, read from /proc before the first request and after
the last terminal event. The same figure for the HTTP path comes from the 1-replica run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import aiohttp
from _common import ROOT, Stopwatch
from aiokafka import AIOKafkaProducer
from harness import Topics, WorkerProcess, collecting, descendants
from testsite import serve

from service.broker import LocalBroker
from service.contracts import CrawlOptions, CrawlRequest, dump
from service.messaging.topics import ensure_topics, partition_for

if TYPE_CHECKING:
    from harness import Collector

PARTITIONS: Final = 12
"""Request partitions (the service's default)."""

CEILING: Final = 8
"""Page slots (and pages per host) of each worker."""

GROUP_DEADLINE_S: Final = 120.0
RUN_DEADLINE_S: Final = 600.0
POLL_S: Final = 0.2
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    replicas: int
    pages: int
    seconds: float
    cpu_ms: float
    by_worker: dict[str, int]
    start_s: float
    """From the first request produced to the first page starting."""
    end_s: float
    """From the last page done to its request's terminal event read."""

    @property
    def rate(self) -> float:
        return self.pages / self.seconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def balanced_ids(prefix: str, count: int) -> list[str]:
    """`count` request IDs, `count / PARTITIONS` (rounded up) on each request partition."""
    per_partition = -(-count // PARTITIONS)
    taken: Counter[int] = Counter()
    ids: list[str] = []
    n = 0
    while len(ids) < count:
        candidate = f"{prefix}-r{n}"
        partition = partition_for(candidate, PARTITIONS)
        if taken[partition] < per_partition:
            taken[partition] += 1
            ids.append(candidate)
        n += 1
    return ids


def spread(ids: list[str]) -> list[int]:
    """Requests per request partition, most loaded first."""
    counts = Counter(partition_for(rid, PARTITIONS) for rid in ids)
    return sorted((counts.get(p, 0) for p in range(PARTITIONS)), reverse=True)


def tree_cpu_ms(pid: int) -> float:
    """CPU time of `pid` and everything under it, reaped children included, in ms."""
    total = 0
    for member in {pid, *descendants(pid)}:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return total * 1000 / CLOCK_TICKS


async def _concurrency(port: int) -> float:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        text = await response.text()
    found = re.search(r"^crawl_concurrency_limit (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _assigned(worker: WorkerProcess) -> set[int]:
    owned: set[int] = set()
    for entry in worker.events():
        if entry.get("event") == "consumer.assigned":
            owned = set(entry["partitions"])
        elif entry.get("event") == "consumer.revoked":
            owned -= set(entry["partitions"])
    return owned


async def wait_stable(workers: list[WorkerProcess], ports: list[int]) -> None:
    """Until the workers own every partition once and each governor is at its ceiling."""
    async with asyncio.timeout(GROUP_DEADLINE_S):
        while True:
            owned = [_assigned(worker) for worker in workers]
            split = all(owned) and sum(map(len, owned)) == len(set().union(*owned)) == PARTITIONS
            if split:
                limits = [await _concurrency(port) for port in ports]
                if min(limits) >= CEILING:
                    return
            await asyncio.sleep(POLL_S)


async def measure(
    bootstrap: str,
    site_port: int,
    replicas: int,
    args: argparse.Namespace,
    render: str,
    requests: int,
) -> Figures:
    topics = Topics(
        bootstrap=bootstrap,
        extra_env={
            "CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site_port}",
            "CRAWL_REQUESTS_PARTITIONS": str(PARTITIONS),
            "CRAWL_OUTPUT_PARTITIONS": str(PARTITIONS),
            "CRAWL_MAX_PAGE_SLOTS": str(CEILING),
            "CRAWL_MAX_PAGES_PER_HOST": str(CEILING),
        },
    )
    await ensure_topics(
        topics.settings(requests_partitions=PARTITIONS, output_partitions=PARTITIONS)
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
    try:
        await asyncio.gather(*(worker.start() for worker in workers))
        await wait_stable(workers, ports)
        ids = balanced_ids(topics.prefix, requests)
        options = CrawlOptions(render=render)  # type: ignore[arg-type]
        messages = []
        for rid in ids:
            urls = [
                f"{_site(site_port)}/slow/{rid}-{i}?ms={args.page_ms}" for i in range(args.urls)
            ]
            request = CrawlRequest(request_id=rid, urls=urls, options=options)
            messages.append((rid.encode(), dump(request)))
        async with collecting(topics) as collector:
            pids = [worker.process.pid for worker in workers if worker.process is not None]
            cpu_before = sum(tree_cpu_ms(pid) for pid in pids)
            began = time.time()
            with Stopwatch() as watch:
                await produce_all(topics, messages)
                await _all_done(collector, ids)
            ended = time.time()
            cpu_ms = sum(tree_cpu_ms(pid) for pid in pids) - cpu_before
            results = [result for result, _ in collector.seen.results]
            by_worker = Counter(result.worker for result in results)
            first = min(r.fetched_at.timestamp() - r.elapsed_ms / 1000 for r in results)
            last = max(r.fetched_at.timestamp() for r in results)
    finally:
        for worker in workers:
            with contextlib.suppress(Exception):
                await worker.terminate()
            await worker.close()
    return Figures(
        replicas=replicas,
        pages=requests * args.urls,
        seconds=watch.seconds,
        cpu_ms=cpu_ms,
        by_worker=dict(sorted(by_worker.items())),
        start_s=first - began,
        end_s=ended - last,
    )


async def produce_all(topics: Topics, messages: list[tuple[bytes, bytes]]) -> None:
    """Send every request at once (acks=all) and wait for all acknowledgements together."""
    producer = AIOKafkaProducer(bootstrap_servers=topics.bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = [await producer.send(topics.requests, value, key=key) for key, value in messages]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def _site(port: int) -> str:
    return f"http://127.0.0.1:{port}"


async def _all_done(collector: Collector, ids: list[str]) -> None:
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in ids), deadline_s=RUN_DEADLINE_S
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--urls", type=int, default=10)
    parser.add_argument("--page-ms", type=int, default=500)
    parser.add_argument("--replicas", default="1,2,3")
    parser.add_argument("--cpu-pages", type=int, default=80)
    args = parser.parse_args()
    counts = [int(value) for value in args.replicas.split(",")]
    started = time.strftime("%Y-%m-%d %H:%M")
    async with serve() as site, LocalBroker() as broker:
        bootstrap = broker.bootstrap_servers
        runs = [await measure(bootstrap, site.port, n, args, "http", args.requests) for n in counts]
        browser = await measure(
            bootstrap, site.port, 1, args, "browser", max(args.cpu_pages // args.urls, 1)
        )
    plain = [f"x-{n}" for n in range(args.requests)]
    print(f"{started}, {os.cpu_count()} cores; {args.requests} requests x {args.urls} pages of")
    print(f"{args.page_ms} ms (server side), render http, {PARTITIONS} request partitions")
    print(f"requests per partition: balanced IDs {spread(balanced_ids('x', args.requests))}")
    print(f"                        plain IDs    {spread(plain)} (not used)")
    print(
        f"{'replicas':<10}{'pages/s':>10}{'x one':>8}{'seconds':>10}{'start s':>9}{'end s':>7}"
        "  pages per worker"
    )
    one = runs[0].rate
    for run in runs:
        print(
            f"{run.replicas:<10}{run.rate:>10.2f}{run.rate / one:>8.2f}{run.seconds:>10.2f}"
            f"{run.start_s:>9.2f}{run.end_s:>7.2f}  {run.by_worker}"
        )
    http_cpu = runs[0].cpu_ms / runs[0].pages
    print(f"CPU per page, worker + Chromium tree: http {http_cpu:.1f} ms", end="")
    print(f" ({runs[0].pages} pages), browser {browser.cpu_ms / browser.pages:.1f} ms", end="")
    print(f" ({browser.pages} pages, {browser.rate:.2f} pages/s, one worker)")


if __name__ == "__main__":
    asyncio.run(main())
