"""A deep crawl against a list crawl of the same pages, and the memory of the seen set.

    .venv/bin/python bench/deep_crawl.py [--rounds 2]

On the generated 300-page graph site (tests/support/graphsite.py), with default settings:

(a) one worker: a list crawl of the 299 URLs a depth-5 crawl from the home page reaches
    (3 requests of at most 100 URLs), then the deep crawl itself (one request,
    `max_depth` 5, `max_pages` 300); each timed from the first request produced to the last
    terminal event read, `--rounds` times alternating. Prints pages/s and their ratio.
(b) three workers in the group, the same two crawls: a list crawl spreads its requests over
    the replicas, a deep crawl renders on its owner. This is the measurement behind rendering
    a job on its owner (see docs/job-control.md, "Deep crawl").
(c) memory: `SeenSet` of 100,000 URL fingerprints (table bytes and tracemalloc peak), and a
    `CrawlPlan` fed 100,000 discovered URLs (budget 10,000).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
import tracemalloc
import uuid

from _common import ROOT, Stopwatch, until_terminal, worker_env
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from graphsite import serve_graph
from reference_crawl import reference_crawl

from service.broker import LocalBroker
from service.contracts import CrawlRequest, CrawlSpec, dump_request
from service.frontier.plan import MAX_CANDIDATES, CrawlPlan, Expansion
from service.frontier.seen import SeenSet
from service.frontier.urls import fingerprint
from service.messaging.topics import ensure_topics
from service.settings import Settings

URLS_PER_REQUEST = 100
DEEP = {"max_depth": 5, "max_pages": 300}
SEEN_URLS = 100_000


class Bench:
    """One broker, a prefix of topics, worker processes and a progress reader."""

    def __init__(self, bootstrap: str, site_port: int) -> None:
        self.bootstrap = bootstrap
        self.prefix = f"deep{uuid.uuid4().hex[:6]}"
        self.env = worker_env(
            bootstrap,
            self.prefix,
            site_port,
            CRAWL_FRONTIER_TOPIC=f"{self.prefix}.frontier",
            CRAWL_CONTROL_TOPIC=f"{self.prefix}.control",
        )
        self.settings = Settings(
            kafka_bootstrap_servers=bootstrap,
            requests_topic=f"{self.prefix}.requests",
            results_topic=f"{self.prefix}.results",
            progress_topic=f"{self.prefix}.progress",
            dead_letter_topic=f"{self.prefix}.dead-letter",
            frontier_topic=f"{self.prefix}.frontier",
            control_topic=f"{self.prefix}.control",
        )
        self.workers: list[asyncio.subprocess.Process] = []

    async def start_worker(self) -> None:
        log = (ROOT / ".bench" / f"{self.prefix}-{len(self.workers)}.log").open("wb")
        self.workers.append(
            await asyncio.create_subprocess_exec(
                sys.executable, "-m", "service", "worker", env=self.env, stderr=log
            )
        )
        await self.wait_for_members(len(self.workers))

    async def wait_for_members(self, count: int) -> None:
        """Until the group is stable with `count` members that all have partitions."""
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        group_id = self.env["CRAWL_GROUP_ID"]
        try:
            async with asyncio.timeout(120):
                while True:
                    with contextlib.suppress(KafkaError):
                        [response] = await admin.describe_consumer_groups([group_id])
                        # raw DescribeGroups: (error, group, state, protocol type, protocol,
                        # members: (id, client id, host, metadata, assignment))
                        [(_, _, state, _, _, members, *_)] = response.groups
                        assigned = [m for m in members if m[4]]
                        if state == "Stable" and len(assigned) == count == len(members):
                            return
                    await asyncio.sleep(0.5)
        finally:
            await admin.close()

    async def crawl(self, requests: list[CrawlRequest]) -> float:
        """Seconds from the first request produced to the last terminal event read."""
        consumer = AIOKafkaConsumer(
            self.settings.progress_topic,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="latest",
            group_id=None,
        )
        await consumer.start()
        await consumer.seek_to_end()
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        await producer.start()
        pending = {request.request_id for request in requests}
        try:
            with Stopwatch() as watch:
                for request in requests:
                    key = request.request_id.encode()
                    await producer.send(
                        self.settings.requests_topic, dump_request(request), key=key
                    )
                await producer.flush()
                await until_terminal(consumer, pending)
        finally:
            await producer.stop()
            await consumer.stop()
        return watch.seconds

    async def stop(self) -> None:
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            await worker.wait()


def _list_requests(urls: list[str], tag: str) -> list[CrawlRequest]:
    chunks = [urls[i : i + URLS_PER_REQUEST] for i in range(0, len(urls), URLS_PER_REQUEST)]
    return [CrawlRequest(request_id=f"list-{tag}-{n}", urls=c) for n, c in enumerate(chunks)]


def _deep_request(seed: str, tag: str) -> list[CrawlRequest]:
    return [CrawlRequest(request_id=f"deep-{tag}", urls=[seed], crawl=CrawlSpec(**DEEP))]


async def _compare(bench: Bench, seed: str, urls: list[str], rounds: int, tag: str) -> None:
    list_rates, deep_rates = [], []
    for n in range(rounds):
        list_rates.append(len(urls) / await bench.crawl(_list_requests(urls, f"{tag}{n}")))
        deep_rates.append(len(urls) / await bench.crawl(_deep_request(seed, f"{tag}{n}")))
    for n in range(rounds):
        print(f"  round {n}: list {list_rates[n]:6.2f} pages/s, deep {deep_rates[n]:6.2f} pages/s")
    ratio = statistics.median(deep_rates) / statistics.median(list_rates)
    print(f"  median ratio deep/list: {ratio:.2f}")


def seen_memory() -> None:
    urls = [
        f"https://example.com/section/{i // 100}/page-{i}?ref={i % 7}" for i in range(SEEN_URLS)
    ]
    tracemalloc.start()
    seen = SeenSet()
    for url in urls:
        seen.add(fingerprint(url))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"SeenSet of {len(seen):,} URLs: table {seen.nbytes / len(seen):.1f} B/URL, ", end="")
    print(f"peak while building {peak / len(seen):.1f} B/URL")
    plan = CrawlPlan(CrawlSpec(max_pages=10_000, max_depth=3), ["https://example.com/"])
    pages = [urls[i : i + MAX_CANDIDATES] for i in range(0, len(urls), MAX_CANDIDATES)]
    tracemalloc.start()
    started = time.perf_counter()
    for n, links in enumerate(pages):  # each admitted page in turn links the next 2,000 URLs
        page = plan.admitted[n].url
        plan.expanded(page, Expansion(plan.candidates(page, links)))
    seconds = time.perf_counter() - started
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"CrawlPlan with {plan.discovered:,} discovered, {len(plan.admitted):,} admitted: "
        f"{current / 2**20:.1f} MiB held ({current / plan.discovered:.0f} B/URL), "
        f"peak {peak / 2**20:.1f} MiB, {seconds * 1e6 / plan.discovered:.1f} us/URL to fold"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    (ROOT / ".bench").mkdir(exist_ok=True)
    seen_memory()
    async with serve_graph() as site, LocalBroker() as broker:
        seed = site.url("/")
        urls = [page.url for page in reference_crawl(site, [seed], **DEEP)]
        bench = Bench(broker.bootstrap_servers, site.port)
        await ensure_topics(bench.settings)
        try:
            await bench.start_worker()
            await bench.crawl(_list_requests(urls[:40], "warm"))
            print(f"{len(urls)} pages of the graph site, default settings")
            print("one worker:")
            await _compare(bench, seed, urls, args.rounds, "one")
            await bench.start_worker()
            await bench.start_worker()
            print("three workers (list requests spread; a deep crawl renders on its owner):")
            await _compare(bench, seed, urls, args.rounds, "three")
        finally:
            await bench.stop()


if __name__ == "__main__":
    asyncio.run(main())
