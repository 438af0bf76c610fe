"""What the page cache saves, measured side by side in one run.

    .venv/bin/python bench/freshness.py [--pages 1000] [--render browser] [--entries 100000]

On a generated site of `--pages` pages (a binary tree of links, every even page with an
`ETag`), one worker, default settings:

(a) a deep crawl of the whole site cold (`max_age_ms` 0), then again with `max_age_ms` of an
    hour: pages the site served in full, and the wall-time ratio warm/cold;
(b) 10% of the pages change, then the crawl again with every entry stale (`max_age_ms` 1):
    full answers, conditional requests answered 304, and bytes the site sent;
(c) the p50 of a 1-URL request answered from the cache against one rendered fresh;
(d) the rebuild of a partition of `--entries` index records by a fetcher that takes it over
    (first lookup), and the memory of the index it holds (per entry, and for 1,000,000).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import time
import tracemalloc
import uuid
from collections import Counter
from datetime import UTC, datetime

from _common import ROOT, Stopwatch, until_terminal, worker_env
from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from service.broker import LocalBroker
from service.cache.records import CacheIndexRecord
from service.cache.store import IndexSlot, KafkaCacheStore
from service.contracts import CrawlOptions, CrawlRequest, CrawlSpec, dump_request
from service.messaging.publisher import Publisher
from service.messaging.topics import ensure_topics
from service.settings import Settings

HOUR_MS = 3_600_000
CHANGED_SHARE = 10
"""One page in this many changes before the stale crawl."""
LATENCY_SAMPLES = 15
PARAGRAPHS = 20
"""Paragraphs of text on each page (about 2 KB)."""


class Site:
    """Pages `/f/<i>` linking to `/f/<2i+1>` and `/f/<2i+2>`; even pages carry an `ETag`
    and answer a matching `If-None-Match` with 304."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.versions: Counter[int] = Counter()
        self.answers: Counter[int] = Counter()
        self.bytes_sent = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes([web.get("/f/{n}", self.page), web.get("/solo/{n}", self.solo)])
        return app

    async def page(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n >= self.pages:
            raise web.HTTPNotFound
        etag = f'"{n}-{self.versions[n]}"'
        headers = {"ETag": etag} if n % 2 == 0 else {}
        if headers and request.headers.get("If-None-Match") == etag:
            self.answers[304] += 1
            return web.Response(status=304, headers=headers)
        links = "".join(
            f'<a href="/f/{child}">child {child}</a> '
            for child in (2 * n + 1, 2 * n + 2)
            if child < self.pages
        )
        body = _document(f"page {n} version {self.versions[n]}", links)
        self.answers[200] += 1
        self.bytes_sent += len(body)
        return web.Response(text=body, content_type="text/html", headers=headers)

    async def solo(self, request: web.Request) -> web.Response:
        body = _document(f"solo {request.match_info['n']}", "")
        return web.Response(text=body, content_type="text/html")


def _document(title: str, links: str) -> str:
    words = " ".join(f"<p>{title}: paragraph {i} of plain words.</p>" for i in range(PARAGRAPHS))
    return f"<html><head><title>{title}</title></head><body>{words}{links}</body></html>"


class Bench:
    """One broker, one worker, topics of this run's own."""

    def __init__(self, bootstrap: str, site_port: int, render: str) -> None:
        self.bootstrap = bootstrap
        self.render = render
        prefix = f"fresh{uuid.uuid4().hex[:6]}"
        names = ("frontier", "control", "pages", "hosts", "cache.index", "cache.bodies")
        extra = {
            f"CRAWL_{name.upper().replace('.', '_')}_TOPIC": f"{prefix}.{name}" for name in names
        }
        self.env = worker_env(
            bootstrap, prefix, site_port, CRAWL_FETCHER_GROUP_ID=f"{prefix}-f", **extra
        )
        self.settings = Settings(
            kafka_bootstrap_servers=bootstrap,
            requests_topic=f"{prefix}.requests",
            results_topic=f"{prefix}.results",
            progress_topic=f"{prefix}.progress",
            dead_letter_topic=f"{prefix}.dead-letter",
            frontier_topic=f"{prefix}.frontier",
            control_topic=f"{prefix}.control",
            pages_topic=f"{prefix}.pages",
            hosts_topic=f"{prefix}.hosts",
            cache_index_topic=f"{prefix}.cache.index",
            cache_bodies_topic=f"{prefix}.cache.bodies",
        )
        self.worker: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        await ensure_topics(self.settings)
        log = (ROOT / ".bench" / "freshness-worker.log").open("wb")
        self.worker = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "service", "worker", env=self.env, stderr=log
        )

    async def stop(self) -> None:
        if self.worker is not None:
            self.worker.terminate()
            await self.worker.wait()

    async def run(self, request: CrawlRequest) -> float:
        """Seconds from the request produced to its terminal event."""
        consumer = AIOKafkaConsumer(
            self.settings.progress_topic, bootstrap_servers=self.bootstrap, group_id=None
        )
        await consumer.start()
        await consumer.seek_to_end()
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap)
        await producer.start()
        try:
            with Stopwatch() as watch:
                await producer.send_and_wait(
                    self.settings.requests_topic,
                    dump_request(request),
                    key=request.request_id.encode(),
                )
                async with asyncio.timeout(1800):
                    await until_terminal(consumer, {request.request_id})
        finally:
            await producer.stop()
            await consumer.stop()
        return watch.seconds

    def deep(self, site: Site, base: str, max_age_ms: int) -> CrawlRequest:
        return CrawlRequest(
            request_id=f"deep-{uuid.uuid4().hex[:8]}",
            urls=[f"{base}/f/0"],
            options=CrawlOptions(render=self.render, max_age_ms=max_age_ms),  # type: ignore[arg-type]
            crawl=CrawlSpec(max_pages=site.pages, max_depth=30),
        )

    def one(self, url: str, max_age_ms: int) -> CrawlRequest:
        options = CrawlOptions(render=self.render, max_age_ms=max_age_ms)  # type: ignore[arg-type]
        return CrawlRequest(request_id=f"one-{uuid.uuid4().hex[:8]}", urls=[url], options=options)


async def crawls(bench: Bench, site: Site, base: str) -> None:
    def took(before: Counter[int], sent: int) -> str:
        full, revalidated = site.answers[200] - before[200], site.answers[304] - before[304]
        return f"{full} full answers, {revalidated} answered 304, {site.bytes_sent - sent:,} bytes"

    before, sent = Counter(site.answers), site.bytes_sent
    cold = await bench.run(bench.deep(site, base, 0))
    print(f"(a) cold deep crawl of {site.pages} pages: {cold:6.1f} s, {took(before, sent)}")
    before, sent = Counter(site.answers), site.bytes_sent
    warm = await bench.run(bench.deep(site, base, HOUR_MS))
    print(f"    again with max_age_ms 1 h: {warm:6.1f} s, {took(before, sent)}")
    print(f"    wall-time ratio warm/cold: {warm / cold:.3f}")
    for n in range(0, site.pages, CHANGED_SHARE):
        site.versions[n + (n // CHANGED_SHARE) % 2] += 1  # as many with an ETag as without
    before, sent = Counter(site.answers), site.bytes_sent
    stale = await bench.run(bench.deep(site, base, 1))
    print(
        f"(b) stale, {site.pages // CHANGED_SHARE} pages changed, half with ETags: "
        f"{stale:6.1f} s, {took(before, sent)}; cold sent {site.pages} full answers"
    )


async def latency(bench: Bench, base: str) -> None:
    fresh = [await bench.run(bench.one(f"{base}/solo/{n}", 0)) for n in range(LATENCY_SAMPLES)]
    await bench.run(bench.one(f"{base}/solo/hit", 0))
    hits = [await bench.run(bench.one(f"{base}/solo/hit", HOUR_MS)) for _ in fresh]
    fresh_ms, hit_ms = statistics.median(fresh) * 1000, statistics.median(hits) * 1000
    print(
        f"(c) 1-URL request p50: fresh render {fresh_ms:.0f} ms, cache hit {hit_ms:.0f} ms, "
        f"ratio hit/render {hit_ms / fresh_ms:.2f} (target <= 0.5)"
    )


async def rebuild(bench: Bench, entries: int) -> None:
    settings = bench.settings.model_copy(
        update={
            "cache_index_topic": f"{bench.settings.cache_index_topic}.rebuild",
            "cache_bodies_topic": f"{bench.settings.cache_bodies_topic}.rebuild",
        }
    )
    await ensure_topics(settings)
    now = datetime.now(UTC)
    producer = AIOKafkaProducer(bootstrap_servers=bench.bootstrap, linger_ms=20)
    await producer.start()
    try:
        for n in range(entries):
            record = _entry(n, now)
            await producer.send(
                settings.cache_index_topic,
                record.model_dump_json().encode(),
                key=record.key.encode(),
                partition=0,
            )
        await producer.flush()
    finally:
        await producer.stop()
    async with Publisher(settings) as publisher, KafkaCacheStore(settings, publisher) as store:
        tracemalloc.start()
        started = time.perf_counter()
        found = await store.find(0, _entry(entries - 1, now).key)
        seconds = time.perf_counter() - started
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(
        f"(d) rebuild of a {entries:,}-entry partition on takeover: {seconds:.1f} s "
        f"(found the last entry: {found is not None}); {held / entries:.0f} B an entry held "
        f"while reading ({held / 2**20:.0f} MiB)"
    )
    index_memory(1_000_000, now)


def index_memory(entries: int, now: datetime) -> None:
    tracemalloc.start()
    index = {}
    for n in range(entries):
        record = _entry(n, now)
        index[bytes.fromhex(record.key)] = IndexSlot(record)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"    index in memory: {held / entries:.0f} B an entry; 100,000 entries "
        f"{held / entries * 1e5 / 2**20:.0f} MiB, 1,000,000 entries {held / 2**20:.0f} MiB"
    )


def _entry(n: int, now: datetime) -> CacheIndexRecord:
    key = hashlib.sha256(f"entry-{n}".encode()).hexdigest()
    return CacheIndexRecord(
        key=key,
        url=f"https://shop.example.com/catalogue/item-{n}?ref=list",
        fetched_at=now,
        validated_at=now,
        body_offset=n,
        etag=f'"{n:x}-5f3a9c"',
        last_modified="Wed, 01 Jan 2025 00:00:00 GMT",
        content_sha256=key,
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--render", choices=("browser", "http"), default="browser")
    parser.add_argument("--entries", type=int, default=100_000)
    args = parser.parse_args()
    (ROOT / ".bench").mkdir(exist_ok=True)
    site = Site(args.pages)
    runner = web.AppRunner(site.app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    base = f"http://127.0.0.1:{port}"
    try:
        async with LocalBroker() as broker:
            bench = Bench(broker.bootstrap_servers, port, args.render)
            await bench.start()
            try:
                print(f"render {args.render}, one worker, default settings")
                await crawls(bench, site, base)
                await latency(bench, base)
                await rebuild(bench, args.entries)
            finally:
                await bench.stop()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
