"""The render paths side by side: `bench/throughput.py` runs these rows after its own, in the
same run (or alone: `.venv/bin/python bench/render_paths.py [--pages 300]`).

The service on a site that is 90% static (`/page/{n}`) and 10%
    script-rendered (`/app/{kind}/{n}`, the four kinds of the test corpus, same host), once
    with `render: browser`, `http` and `auto` each (a fresh worker for each). Prints pages/s
    and its ratio to the browser path, how many script-rendered pages have their content
    (the marker only the script inserts is in the Markdown), which path rendered the pages,
    and memory per page: (peak PSS - PSS before the first request) / concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import ROOT, PeakPss, Stopwatch, mib, worker_env
from playwright.async_api import async_playwright
from testsite import serve

from service.backpressure._proctree import tree_memory
from service.broker import LocalBroker
from service.contracts import CrawlOptions, CrawlRequest, dump
from service.crawling.launch import CHROMIUM_ARGS
from service.messaging.chunks import Reassembler
from service.settings import Settings

if TYPE_CHECKING:
    from aiokafka import ConsumerRecord
    from testsite import TestSite

URLS_PER_REQUEST = 10


JS_EVERY = 10
"""One page in this many of the mixed site is script-rendered."""


def _urls(base: str, pages: int, run: str) -> list[str]:
    return [f"{base}/page/{n}?run={run}" for n in range(pages)]


def _mixed_urls(base: str, pages: int, run: str) -> dict[str, str | None]:
    """URL -> the marker its script inserts (None for a static page)."""
    from _jsapps import JS_KINDS, marker  # noqa: PLC0415

    urls: dict[str, str | None] = {}
    for n in range(pages):
        if n % JS_EVERY == JS_EVERY - 1:
            kind = JS_KINDS[(n // JS_EVERY) % len(JS_KINDS)]
            urls[f"{base}/app/{kind}/{n}?run={run}"] = marker(kind, n)
        else:
            urls[f"{base}/page/{n}?run={run}"] = None
    return urls


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
    render: str = "browser",
) -> Run:
    """pages/s, peak PSS and results of one worker process crawling `urls` through Kafka."""
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
        settings.results_topic,
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
    results: list[Any] = []
    reassembler = Reassembler()
    options = CrawlOptions(render=render)  # type: ignore[arg-type]
    idle = await asyncio.to_thread(tree_memory, Path("/proc"), worker.pid)
    async with PeakPss(worker.pid).running() as pss:
        with Stopwatch() as watch:
            for n, chunk in enumerate(chunks):
                request = CrawlRequest(request_id=f"{prefix}-{n}", urls=chunk, options=options)
                pending.add(request.request_id)
                await producer.send(
                    settings.requests_topic, dump(request), key=request.request_id.encode()
                )
            await producer.flush()
            async for record in consumer:
                if _take(record, settings.results_topic, reassembler, results):
                    continue
                event = ProgressEvent.model_validate_json(record.value)
                if event.is_terminal:
                    pending.discard(event.request_id)
                    if not pending:
                        break
    async with asyncio.timeout(RESULTS_DEADLINE_S):  # results read after the last event
        while len(results) < len(urls):
            record = await consumer.getone()
            _take(record, settings.results_topic, reassembler, results)
    await producer.stop()
    await consumer.stop()
    worker.terminate()
    await worker.wait()
    return Run(rate=len(urls) / watch.seconds, peak=pss.peak, idle=idle, results=results)


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    rate: float
    peak: int
    idle: int
    """PSS of the worker's tree before the first request."""
    results: list[Any]


RESULTS_DEADLINE_S = 60.0
"""How long results still on their way after the last terminal event may take to be read."""


def _take(
    record: ConsumerRecord[bytes, bytes],
    results_topic: str,
    reassembler: Reassembler,
    results: list[Any],
) -> bool:
    """Keep `record` if it is (the last chunk of) a result; whether it was on the results topic."""
    from service.contracts import PageResult  # noqa: PLC0415

    if record.topic != results_topic:
        return False
    whole = reassembler.add(record.value, list(record.headers))
    if whole is not None:
        results.append(PageResult.model_validate_json(whole))
    return True


def _js_present(run: Run, markers: dict[str, str | None]) -> tuple[int, int]:
    """Script-rendered pages whose content is in the Markdown, and how many there are."""
    by_url = {result.url: result for result in run.results}
    wanted = {url: text for url, text in markers.items() if text is not None}
    found = sum(
        url in by_url and text in (by_url[url].markdown or "") for url, text in wanted.items()
    )
    return found, len(wanted)


def _log_file(prefix: str) -> object:
    path = ROOT / ".bench" / f"{prefix}-worker.log"
    path.parent.mkdir(exist_ok=True)
    return path.open("wb")


def _chromium() -> str:
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(candidate):  # noqa: PTH110
            return candidate
    raise SystemExit("no system Chromium found")


async def render_rows(bootstrap: str, site: TestSite, pages: int, concurrency: int) -> None:
    """Run the three render paths on the mixed site and print their rows."""
    paths: dict[str, Run] = {}
    mixed = {render: _mixed_urls(site.base_url, pages, render) for render in RENDERS}
    for render, urls in mixed.items():
        paths[render] = await service(bootstrap, site.port, list(urls), concurrency, render=render)
    _print_paths(paths, mixed, concurrency)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    async with serve() as site, LocalBroker() as broker:
        await render_rows(broker.bootstrap_servers, site, args.pages, args.concurrency)


RENDERS = ("browser", "http", "auto")


def _print_paths(
    paths: dict[str, Run], mixed: dict[str, dict[str, str | None]], concurrency: int
) -> None:
    browser = paths["browser"].rate
    print("\nrender paths on a site of 90% static, 10% script-rendered pages (one host)")
    print(
        f"{'render':<10}{'pages/s':>10}{'x browser':>11}{'JS content':>12}"
        f"{'peak PSS':>12}{'MiB/page':>10}  rendered_by"
    )
    for render, run in paths.items():
        found, total = _js_present(run, mixed[render])
        per_page = (run.peak - run.idle) / concurrency / 2**20
        by = Counter(str(result.rendered_by) for result in run.results)
        print(
            f"{render:<10}{run.rate:>10.2f}{run.rate / browser:>11.2f}{f'{found}/{total}':>12}"
            f"{mib(run.peak):>12}{per_page:>10.1f}  {dict(sorted(by.items()))}"
        )


if __name__ == "__main__":
    asyncio.run(main())
