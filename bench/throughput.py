"""Service end to end against a bare Playwright loop, side by side on the same local site.

    .venv/bin/python bench/throughput.py [--pages 300] [--concurrency 8]

(a) bare: one browser, one context, `concurrency` reused pages, `goto` + `content()`.
(b) service: a real broker, one `crawlstream worker` process, requests of 10 URLs asking
    for markdown+links+metadata, timed from the first request produced to the last terminal
    event read. Prints pages/s of each, their ratio, and peak PSS of each process tree.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid

from _common import ROOT, PeakPss, Stopwatch, mib, worker_env
from playwright.async_api import async_playwright
from testsite import serve

from service.broker import LocalBroker
from service.contracts import CrawlRequest, dump
from service.crawling.launch import CHROMIUM_ARGS
from service.settings import Settings

URLS_PER_REQUEST = 10


def _urls(base: str, pages: int, run: str) -> list[str]:
    return [f"{base}/page/{n}?run={run}" for n in range(pages)]


async def bare_loop(urls: list[str], concurrency: int) -> tuple[float, int]:
    """pages/s and peak PSS of a plain Playwright loop with the service's launch flags."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for url in urls:
        queue.put_nowait(url)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=_chromium(), args=list(CHROMIUM_ARGS), headless=True
        )
        context = await browser.new_context()
        pages = [await context.new_page() for _ in range(concurrency)]

        async def drive(page: object) -> None:
            while not queue.empty():
                url = queue.get_nowait()
                await page.goto(url, timeout=30_000)  # type: ignore[attr-defined]
                await page.content()  # type: ignore[attr-defined]

        async with PeakPss(os.getpid()).running() as pss:
            with Stopwatch() as watch:
                await asyncio.gather(*(drive(page) for page in pages))
        await browser.close()
    return len(urls) / watch.seconds, pss.peak


async def service(
    bootstrap: str,
    site_port: int,
    urls: list[str],
    slots: int,
    extra_env: dict[str, str] | None = None,
) -> tuple[float, int]:
    """pages/s and peak PSS of one worker process crawling `urls` through Kafka."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

    from service.contracts import ProgressEvent  # noqa: PLC0415
    from service.messaging.topics import ensure_topics  # noqa: PLC0415

    prefix = f"bench{uuid.uuid4().hex[:6]}"
    env = worker_env(
        bootstrap,
        prefix,
        site_port,
        CRAWL_MAX_PAGE_SLOTS=str(slots),
        CRAWL_MAX_PAGES_PER_HOST=str(slots),
        **(extra_env or {}),
    )
    settings = Settings(
        kafka_bootstrap_servers=bootstrap,
        requests_topic=f"{prefix}.requests",
        results_topic=f"{prefix}.results",
        progress_topic=f"{prefix}.progress",
        dead_letter_topic=f"{prefix}.dead-letter",
    )
    await ensure_topics(settings)
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "service", "worker", env=env, stderr=_log_file(prefix)
    )
    consumer = AIOKafkaConsumer(
        settings.progress_topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="latest",
        group_id=None,
    )
    await consumer.start()
    await asyncio.sleep(8)  # the worker joins its group and launches Chromium
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    chunks = [urls[i : i + URLS_PER_REQUEST] for i in range(0, len(urls), URLS_PER_REQUEST)]
    pending = set()
    async with PeakPss(worker.pid).running() as pss:
        with Stopwatch() as watch:
            for n, chunk in enumerate(chunks):
                request = CrawlRequest(request_id=f"{prefix}-{n}", urls=chunk)
                pending.add(request.request_id)
                await producer.send(
                    settings.requests_topic, dump(request), key=request.request_id.encode()
                )
            await producer.flush()
            async for record in consumer:
                event = ProgressEvent.model_validate_json(record.value)
                if event.is_terminal:
                    pending.discard(event.request_id)
                    if not pending:
                        break
    await producer.stop()
    await consumer.stop()
    worker.terminate()
    await worker.wait()
    return len(urls) / watch.seconds, pss.peak


def _log_file(prefix: str) -> object:
    path = ROOT / ".bench" / f"{prefix}-worker.log"
    path.parent.mkdir(exist_ok=True)
    return path.open("wb")


def _chromium() -> str:
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(candidate):  # noqa: PTH110
            return candidate
    raise SystemExit("no system Chromium found")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    async with serve() as site, LocalBroker() as broker:
        await bare_loop(_urls(site.base_url, 40, "warm"), args.concurrency)
        bare_rate, bare_pss = await bare_loop(
            _urls(site.base_url, args.pages, "a"), args.concurrency
        )
        svc_rate, svc_pss = await service(
            broker.bootstrap_servers,
            site.port,
            _urls(site.base_url, args.pages, "b"),
            args.concurrency,
        )
    print(f"pages: {args.pages}, concurrency: {args.concurrency}")
    print(f"{'':<28}{'pages/s':>10}{'peak PSS':>14}")
    print(f"{'bare Playwright loop':<28}{bare_rate:>10.2f}{mib(bare_pss):>14}")
    print(f"{'service through Kafka':<28}{svc_rate:>10.2f}{mib(svc_pss):>14}")
    print(f"ratio service/bare: {svc_rate / bare_rate:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
