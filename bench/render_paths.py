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
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import PeakPss, Stopwatch, mib
from _worker import bench_worker
from testsite import serve

from service.backpressure._proctree import tree_memory
from service.broker import LocalBroker
from service.contracts import CrawlOptions
from service.messaging.chunks import Reassembler

if TYPE_CHECKING:
    from aiokafka import ConsumerRecord
    from testsite import TestSite

JS_EVERY = 10
"""One page in this many of the mixed site is script-rendered."""


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


async def service(
    bootstrap: str,
    site_port: int,
    urls: list[str],
    slots: int,
    extra_env: dict[str, str] | None = None,
    render: str = "browser",
) -> Run:
    """pages/s, peak PSS and results of one worker process crawling `urls` through Kafka."""
    results: list[Any] = []
    reassembler = Reassembler()
    options = CrawlOptions(render=render)  # type: ignore[arg-type]
    async with bench_worker(
        bootstrap, site_port, slots, extra_env=extra_env, results=True
    ) as worker:
        pid = worker.process.pid

        def take(record: ConsumerRecord[bytes, bytes]) -> None:
            _take(record, worker.settings.results_topic, reassembler, results)

        idle = await asyncio.to_thread(tree_memory, Path("/proc"), pid)
        async with PeakPss(pid).running() as pss:
            with Stopwatch() as watch:
                await worker.until_ended(await worker.send(urls, options), take)
        async with asyncio.timeout(RESULTS_DEADLINE_S):  # results read after the last event
            while len(results) < len(urls):
                take(await worker.consumer.getone())
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
