"""End-to-end latency of a 1-URL request against a bare Playwright page load, in one run.

    .venv/bin/python bench/latency.py [--samples 40] [--session KEY]

(a) bare: a warm browser, one context, one reused page; `goto` + `content()` of the page.
(b) service: a real broker (warmed up by a first worker's `BROKER_WARMUP` requests, left
    out) and one `crawlstream worker` process with default settings; one
    1-URL request at a time, from `send` of the request to the terminal event read by a
    consumer of the progress topic. Each sample is split with the Kafka timestamps the worker's
    messages carry (the clocks are one machine's): produce -> `accepted` sent, `accepted` ->
    result sent, result -> terminal event sent, terminal event sent -> read by the consumer.

Prints p50 and p95 of each, and the service's p50 minus the bare p50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

from _common import ROOT, bench_settings, worker_env
from playwright.async_api import async_playwright
from testsite import serve

from service.broker import LocalBroker
from service.browser.launch import CHROMIUM_ARGS, system_chromium
from service.contracts import (
    CrawlOptions,
    CrawlRequest,
    EventType,
    Format,
    ProgressEvent,
    dump_request,
)

WARMUP = 5
"""Samples of each path measured first and left out (the browser and the JIT warm up)."""

BROKER_WARMUP = 40
"""Requests of a first worker's run left out whole: a fresh broker's JVM takes about as many
to warm up (the same checkout measured twice in one run: p50 147 ms first, 136 second), and
whichever checkout ran first paid it."""

SAMPLE_DEADLINE_S = 60.0

PHASES = ("to accepted", "accepted to result", "result to terminal", "terminal to read")


def quantiles(values: list[float]) -> tuple[float, float]:
    """p50 and p95 in milliseconds."""
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p95 * 1000


async def bare(url: str, samples: int) -> list[float]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=system_chromium(), args=list(CHROMIUM_ARGS), headless=True
        )
        page = await (await browser.new_context()).new_page()
        times = []
        for n in range(samples + WARMUP):
            start = time.perf_counter()
            await page.goto(f"{url}?bare={n}", timeout=30_000)
            await page.content()
            times.append(time.perf_counter() - start)
        await browser.close()
    return times[WARMUP:]


async def service(
    broker: LocalBroker,
    site_port: int,
    url: str,
    samples: int,
    session: str | None,
    checkout: Path | None = None,
) -> tuple[list[dict], dict[str, float]]:
    """Per sample: the total and the phases, in seconds; and the worker's own step times."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

    from service.messaging.topics import ensure_topics  # noqa: PLC0415

    bootstrap = broker.bootstrap_servers
    prefix = f"lat{uuid.uuid4().hex[:6]}"
    settings = bench_settings(bootstrap, prefix)
    await ensure_topics(settings)
    log_path = ROOT / ".bench" / f"{prefix}-worker.log"
    log = log_path.open("wb")
    env = worker_env(bootstrap, prefix, site_port, CRAWL_LOG_LEVEL="debug")
    python = str(checkout / ".venv" / "bin" / "python") if checkout else sys.executable
    worker = await asyncio.create_subprocess_exec(
        python, "-m", "service", "worker", env=env, stderr=log, cwd=checkout
    )
    consumer = AIOKafkaConsumer(
        settings.progress_topic,
        settings.results_topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",  # fresh topics: "latest" may be resolved after a record
        group_id=None,
    )
    await consumer.start()
    await asyncio.sleep(8)  # the worker joins its group and launches Chromium
    # started now: metadata read while the new topics had no leaders yet is never refreshed
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks=1)
    await producer.start()
    options = CrawlOptions(
        formats=[Format.MARKDOWN, Format.LINKS, Format.METADATA], session=session
    )
    runs = []
    try:
        for n in range(samples + WARMUP):
            one = _one(producer, consumer, settings, f"{url}?svc={n}", options)
            runs.append(await asyncio.wait_for(one, SAMPLE_DEADLINE_S))
    finally:
        await producer.stop()
        await consumer.stop()
        worker.terminate()
        await worker.wait()
    steps = _timings(log_path)
    return runs[WARMUP:], steps


def _timings(log_path: Path) -> dict[str, float]:
    """Median of each step of the worker's `run.timing` (ms after the record was produced)."""
    lines = log_path.read_text(errors="replace").splitlines()
    rows = [json.loads(line) for line in lines if '"run.timing"' in line][WARMUP:]
    keys = [key for key in rows[0] if key.endswith("_ms")] if rows else []
    return {key: statistics.median(row[key] for row in rows if key in row) for key in keys}


async def _one(producer, consumer, settings, url, options) -> dict:  # noqa: ANN001
    request = CrawlRequest(request_id=f"r-{uuid.uuid4().hex[:8]}", urls=[url], options=options)
    stamps: dict[str, float] = {}
    read = sent = time.time()
    await producer.send_and_wait(
        settings.requests_topic, dump_request(request), key=request.request_id.encode()
    )
    async for record in consumer:
        if record.key != request.request_id.encode():
            continue
        if record.topic == settings.results_topic:
            stamps["result"] = record.timestamp / 1000
        else:
            event = ProgressEvent.model_validate_json(record.value)
            if event.type is EventType.ACCEPTED:
                stamps["accepted"] = record.timestamp / 1000
            if event.is_terminal:
                stamps["terminal"] = record.timestamp / 1000
                read = time.time()
        if "terminal" in stamps and "result" in stamps:
            break
    return {
        "total": read - sent,
        "to accepted": stamps["accepted"] - sent,
        "accepted to result": stamps["result"] - stamps["accepted"],
        "result to terminal": stamps["terminal"] - stamps["result"],
        "terminal to read": read - stamps["terminal"],
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--session", default=None, help="every request in this session")
    parser.add_argument(
        "--baseline", type=Path, default=None, help="another checkout: its p50 beside ours"
    )
    args = parser.parse_args()
    async with serve() as site, LocalBroker() as broker:
        page = f"{site.base_url}/page/7"
        bare_times = await bare(page, args.samples)
        await service(broker, site.port, page, BROKER_WARMUP, args.session)
        runs, steps = await service(broker, site.port, page, args.samples, args.session)
        if args.baseline is not None:
            theirs, _ = await service(
                broker, site.port, page, args.samples, args.session, args.baseline
            )
            base_p50, base_p95 = quantiles([run["total"] for run in theirs])
            print(f"baseline ({args.baseline}): p50 {base_p50:.0f} ms, p95 {base_p95:.0f} ms")
    bare_p50, bare_p95 = quantiles(bare_times)
    svc_p50, svc_p95 = quantiles([run["total"] for run in runs])
    isolation = f"session {args.session!r}" if args.session else "a context per request"
    print(f"samples: {args.samples} of each, after {WARMUP} left out; service: {isolation}")
    print(f"{'':<40}{'p50 ms':>10}{'p95 ms':>10}")
    print(f"{'bare Playwright page load':<40}{bare_p50:>10.0f}{bare_p95:>10.0f}")
    print(f"{'service: produce to terminal event read':<40}{svc_p50:>10.0f}{svc_p95:>10.0f}")
    for phase in PHASES:
        p50, p95 = quantiles([run[phase] for run in runs])
        print(f"{'  ' + phase:<40}{p50:>10.0f}{p95:>10.0f}")
    print("worker steps, median ms after the request was produced (debug log run.timing):")
    for key, value in steps.items():
        print(f"  {key.removesuffix('_ms'):<38}{value:>10.0f}")
    print(f"service p50 - bare p50: {svc_p50 - bare_p50:.0f} ms (target <= 50)")


if __name__ == "__main__":
    asyncio.run(main())
