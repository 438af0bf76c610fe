"""What the page cache saves, measured side by side in one run.

    .venv/bin/python bench/freshness.py [--pages 1000] [--render browser] [--entries 100000]
        [--noisy 500] [--parts all|cache|changes]

On a generated site of `--pages` pages (a binary tree of links, every even page with an
`ETag`), one worker, default settings:

(a) a deep crawl of the whole site cold (`max_age_ms` 0), then again with `max_age_ms` of an
    hour: pages the site served in full, and the wall-time ratio warm/cold;
(b) 10% of the pages change, then the crawl again with every entry stale (`max_age_ms` 1):
    full answers, conditional requests answered 304, and bytes the site sent;
(c) the p50 of a 1-URL request answered from the cache against one rendered fresh;
(d) the rebuild of a partition of `--entries` index records by a fetcher that takes it over
    (first lookup), and the memory of the index it holds (per entry, and for 1,000,000);
(e) change tracking on a corpus of `--noisy` pages whose clock, nonces, scripts, styles,
    attributes, hidden inputs, comments and whitespace differ on every load: tracked twice,
    with one page in ten edited in between; the false-change rate (pages only noise changed
    that were reported `changed`, target 0) and the edits found, read from the change feed.

(f) a monitor (`every 5 seconds`: CRAWL_MONITOR_MIN_INTERVAL is lowered to 1 s for this
    bench only) over `--monitored` noisy pages: one page edited `--edits` times, each time
    the delay from the edit to its `changed` record on the change feed (change-detection
    latency: up to one interval plus one check), and the false-change rate over every check
    after the first (`changed` records of pages never edited, target 0).

`--parts cache` runs (a) to (d), `--parts changes` (e), `--parts monitor` (f).
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
from service.contracts import ChangeTracking, CrawlOptions, CrawlRequest, CrawlSpec, dump_request
from service.contracts_changes import ChangeRecord
from service.contracts_monitors import MonitorRecord, MonitorTarget, ScheduleSpec
from service.messaging.publisher import Publisher
from service.messaging.topics import ensure_topics
from service.settings import Settings

HOUR_MS = 3_600_000
CHANGED_SHARE = 10
"""One page in this many changes before the stale crawl."""
LATENCY_SAMPLES = 15
PARAGRAPHS = 20
"""Paragraphs of text on each page (about 2 KB)."""
MONITOR_EVERY = "every 5 seconds"
NOISY_OFFSET = 100_000
"""The monitored pages are noisy pages apart from (e)'s."""
URLS_PER_REQUEST = 100
"""The noisy corpus goes in requests of this many URLs (the default per-request ceiling)."""


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
        app.add_routes(
            [
                web.get("/f/{n}", self.page),
                web.get("/solo/{n}", self.solo),
                web.get("/noisy/{n}", self.noisy),
            ]
        )
        return app

    async def noisy(self, request: web.Request) -> web.Response:
        """Page n, version `versions[-n - 1]`, with noise that differs on every load."""
        n = int(request.match_info["n"])
        self.answers[-1] += 1
        load = self.answers[-1]
        title = f"noisy {n} version {self.versions[-n - 1]}"
        return web.Response(text=_noisy_document(title, n, load), content_type="text/html")

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


def _noisy_document(title: str, n: int, load: int) -> str:
    """A page whose words are `title`'s, and whose noise (a kind per page, chosen by `n`)
    is made of `load`, the count of every noisy page served so far."""
    token = hashlib.sha256(str(load).encode()).hexdigest()
    noise = (
        f"<time datetime='2026-01-01T00:{load % 60:02d}:00Z'>{load} minutes ago</time>",
        f'<script nonce="{load:x}">window.build = "{load}";</script>',
        f"<style>.p{load} {{ margin: {load % 7}px; }}</style>",
        f'<input type="hidden" name="csrf" value="{token}">',
        f'<p class="build-{load}" data-seen="{load}">Stable words.</p>',
        f"<!-- rendered by node {load} -->{' ' * (load % 5)}\n",
        f"<div hidden>session {load}</div>",
        f'<a href="/noisy/{n}?cb={load}">this page</a>',
    )
    kinds = noise[n % len(noise)] + noise[(n // len(noise)) % len(noise)]
    words = " ".join(f"<p>{title}: paragraph {i} of plain words.</p>" for i in range(5))
    return (
        f"<html><head><title>{title}</title></head><body><main>{words}{kinds}"
        "<p>Stable words.</p></main></body></html>"
    )


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
        extra["CRAWL_CHANGES_TOPIC"] = f"{prefix}.changes"
        extra["CRAWL_MONITORS_TOPIC"] = f"{prefix}.monitors"
        extra["CRAWL_MONITOR_MIN_INTERVAL"] = "1"  # (f) only: a 5 s schedule
        extra["CRAWL_CHANGE_HISTORY_TOPIC"] = f"{prefix}.changes.history"
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
            changes_topic=f"{prefix}.changes",
            change_history_topic=f"{prefix}.changes.history",
            monitors_topic=f"{prefix}.monitors",
            group_id=f"{prefix}-group",
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

    def tracked(self, urls: list[str]) -> CrawlRequest:
        options = CrawlOptions(render=self.render, change_tracking=ChangeTracking())  # type: ignore[arg-type]
        return CrawlRequest(request_id=f"track-{uuid.uuid4().hex[:8]}", urls=urls, options=options)

    async def feed(self) -> list[ChangeRecord]:
        """Every record of the change feed so far."""
        consumer = AIOKafkaConsumer(
            self.settings.changes_topic,
            bootstrap_servers=self.bootstrap,
            group_id=None,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            async with asyncio.timeout(60):
                batches = await consumer.getmany(timeout_ms=2000)
                ends = await consumer.end_offsets(list(consumer.assignment()))
                records = [r for batch in batches.values() for r in batch]
                while len(records) < sum(ends.values()):
                    more = await consumer.getmany(timeout_ms=2000)
                    records += [r for batch in more.values() for r in batch]
        finally:
            await consumer.stop()
        return [ChangeRecord.model_validate_json(r.value) for r in records if r.value]

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


async def false_changes(bench: Bench, site: Site, base: str, pages: int) -> None:
    """Track the noisy corpus twice, one page in ten edited in between; read the feed."""
    urls = [f"{base}/noisy/{n}" for n in range(pages)]
    edited = set(urls[::CHANGED_SHARE])

    async def tracked() -> set[str]:
        batches = [urls[i : i + URLS_PER_REQUEST] for i in range(0, pages, URLS_PER_REQUEST)]
        requests = [bench.tracked(batch) for batch in batches]
        for request in requests:
            await bench.run(request)
        return {request.request_id for request in requests}

    first = await tracked()
    for url in edited:
        site.versions[-int(url.rsplit("/", 1)[1]) - 1] += 1
    second = await tracked()
    feed = await bench.feed()
    new = {r.url for r in feed if r.request_id in first and r.status == "new"}
    changed = {r.url for r in feed if r.request_id in second and r.status == "changed"}
    false = changed - edited
    print(
        f"(e) {pages} noisy pages tracked twice ({bench.render}), {len(edited)} edited between: "
        f"first run new {len(new)}/{pages}; second run changed {len(changed)}, edits found "
        f"{len(changed & edited)}/{len(edited)}; false changes {len(false)}/{pages - len(edited)} "
        f"= {len(false) / (pages - len(edited)):.3f} (target 0)"
    )


async def monitored(bench: Bench, site: Site, base: str, pages: int, edits: int) -> None:
    """A monitor over noisy pages; edits of one page, timed to their change records."""
    urls = [f"{base}/noisy/{n}" for n in range(NOISY_OFFSET, NOISY_OFFSET + pages)]
    now = datetime.now(UTC)
    record = MonitorRecord(
        id=f"bench-{uuid.uuid4().hex[:8]}",
        name="bench",
        schedule=ScheduleSpec(text=MONITOR_EVERY),
        targets=(
            MonitorTarget(
                id="t0", type="scrape", urls=tuple(urls), options=CrawlOptions(render=bench.render)
            ),
        ),  # type: ignore[arg-type]
        tag="bench",
        created_at=now,
        updated_at=now,
        schedule_since=now,
    )
    producer = AIOKafkaProducer(bootstrap_servers=bench.bootstrap)
    await producer.start()
    try:
        value = record.model_dump_json().encode()
        await producer.send_and_wait(bench.settings.monitors_topic, value, key=record.id.encode())
    finally:
        await producer.stop()

    def checks(feed: list[ChangeRecord]) -> set[str]:
        return {r.request_id for r in feed if r.tag == "bench"}

    async with asyncio.timeout(300):
        while True:  # the first check: every page new
            if checks(await bench.feed()):
                break
            await asyncio.sleep(0.5)
    delays = []
    target = urls[0]
    for _ in range(edits):
        seen = {(r.request_id, r.url) for r in await bench.feed()}
        site.versions[-int(target.rsplit("/", 1)[1]) - 1] += 1
        with Stopwatch() as watch:
            await _changed_record(bench, target, seen)
        delays.append(watch.seconds)
    feed = [r for r in await bench.feed() if r.tag == "bench"]
    false = [r for r in feed if r.status == "changed" and r.url != target]
    runs = len(checks(feed)) - 1
    print(
        f"(f) a monitor every 5 s over {pages} noisy pages ({bench.render}), {edits} edits of "
        f"one page: detection latency p50 {statistics.median(delays):.1f} s, max "
        f"{max(delays):.1f} s; false changes {len(false)} in at least {runs * (pages - 1)} "
        "checks of unedited pages (target 0)"
    )
    await _delete_monitor(bench, record.id)


async def _changed_record(bench: Bench, url: str, seen: set[tuple[str, str]]) -> None:
    """Return once the feed holds a new `changed` record of `url`."""

    async def found() -> bool:
        feed = await bench.feed()
        return any(
            r.url == url and r.status == "changed" and (r.request_id, r.url) not in seen
            for r in feed
        )

    async with asyncio.timeout(300):
        while True:
            if await found():
                return
            await asyncio.sleep(0.2)


async def _delete_monitor(bench: Bench, monitor_id: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bench.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(bench.settings.monitors_topic, None, key=monitor_id.encode())
    finally:
        await producer.stop()


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
    parser.add_argument("--noisy", type=int, default=500)
    parser.add_argument("--monitored", type=int, default=20)
    parser.add_argument("--edits", type=int, default=3)
    parser.add_argument("--parts", choices=("all", "cache", "changes", "monitor"), default="all")
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
                if args.parts in {"all", "cache"}:
                    await crawls(bench, site, base)
                    await latency(bench, base)
                    await rebuild(bench, args.entries)
                if args.parts in {"all", "changes"}:
                    await false_changes(bench, site, base, args.noisy)
                if args.parts in {"all", "monitor"}:
                    await monitored(bench, site, base, args.monitored, args.edits)
            finally:
                await bench.stop()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
