"""Service end to end against a bare Playwright loop, side by side on the same local site.

    .venv/bin/python bench/throughput.py [--pages 300] [--concurrency 8] [--py-spy DIR]
        [--no-render-paths] [--log-level debug]

(a) bare: one browser, one context, `concurrency` reused pages, `goto` + `content()`; run
    before and after the service rows, their mean is the reference.
(b) service: a real broker, one `crawlstream worker` process with default settings (but the
    host limit raised to `concurrency`: the site is one host), requests of 10 URLs asking for
    markdown+links+metadata, timed from the first request produced to the last terminal
    event read; once per isolation mode: the default (a context no other request uses,
    wiped and reused between requests), a new context per request (`CRAWL_CONTEXT_REUSE=0`),
    and every request in one `session`; and, beside the default row before and after it, the
    default with `CRAWL_RENDER_SETTLE=0` (read at `load`, no wait for scripts to settle): the
    settle's cost on static pages. Prints pages/s of each, their ratio to the bare
    loop, peak PSS of each process tree, and CPU-ms per page of each process role (worker,
    Playwright's driver, Chromium, broker). `--py-spy DIR` records the worker's Python stacks (needs
    py-spy in the virtual environment; not part of the lock).
(c) render paths (`bench/render_paths.py`, same broker and site, printed first): `render`
    browser, http and auto on a site that is 90% static and 10% script-rendered.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from _common import PeakPss, Stopwatch, mib
from _cpu import CpuAccount, cpu_lines
from _worker import bench_worker
from playwright.async_api import async_playwright
from render_paths import render_rows
from testsite import serve

from service.broker import LocalBroker
from service.browser.launch import CHROMIUM_ARGS, system_chromium
from service.contracts import CrawlOptions, Format

DEFAULT_ROW = "service, default isolation"
"""A context no other request uses, wiped after a request and reused (`CRAWL_CONTEXT_REUSE`)."""

AT_LOAD_ROW = "service, read at load (no settle)"
"""`CRAWL_RENDER_SETTLE=0`: pages read at their `wait_until` state, as before issue 18."""

DEFAULT_AGAIN_ROW = "service, default isolation, again"
"""The default row once more, after the read-at-load row: the settle cost is measured against
both, so drift over the run shows."""


FORMATS = [Format.MARKDOWN, Format.LINKS, Format.METADATA]


@dataclass(frozen=True, slots=True)
class Run:
    """What one path measured."""

    rate: float
    pss: int
    cpu: dict[str, float] = field(default_factory=dict)


def cpu_ms(run: Run, pages: int) -> float:
    """CPU-ms a page of every role of `run` together."""
    return sum(run.cpu.values()) * 1000 / pages


def _urls(base: str, pages: int, run: str) -> list[str]:
    return [f"{base}/page/{n}?run={run}" for n in range(pages)]


async def bare_loop(urls: list[str], concurrency: int) -> Run:
    """pages/s, peak PSS and CPU of a plain Playwright loop with the service's launch flags."""
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

        driver = _driver_pid()
        roots = {os.getpid(): "bench (python)", driver: "driver (node)"}
        async with (
            PeakPss(driver).running() as pss,
            CpuAccount(roots, alone=frozenset({os.getpid()})).running() as cpu,
        ):
            with Stopwatch() as watch:
                await asyncio.gather(*(drive(page) for page in pages))
        await browser.close()
    return Run(len(urls) / watch.seconds, pss.peak, cpu.by_role())


def _driver_pid() -> int:
    """Playwright's driver: the node child of this process."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            if parent == os.getpid() and "(node" in stat:
                return int(entry.name)
    raise SystemExit("Playwright's driver not found")


async def service(
    broker: LocalBroker,
    site_port: int,
    urls: list[str],
    slots: int,
    *,
    session: str | None = None,
    extra_env: dict[str, str] | None = None,
    py_spy: Path | None = None,
    checkout: Path | None = None,
    render: str = "browser",
    store_in_cache: bool = True,
) -> Run:
    """pages/s, peak PSS and CPU of one worker process crawling `urls` through Kafka (every
    request in `session` when given)."""
    async with bench_worker(
        broker.bootstrap_servers, site_port, slots, extra_env=extra_env, checkout=checkout
    ) as worker:
        pid = worker.process.pid
        spy = await _py_spy(pid, py_spy / f"{worker.prefix}.txt") if py_spy else None
        roots = {pid: "worker (python)", broker.pid: "broker (java)"}
        options = CrawlOptions(
            formats=FORMATS,
            session=session,
            render=render,  # type: ignore[arg-type]
            store_in_cache=store_in_cache,
        )
        async with PeakPss(pid).running() as pss, CpuAccount(roots).running() as cpu:
            with Stopwatch() as watch:
                await worker.until_ended(await worker.send(urls, options))
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            await spy.wait()
    return Run(len(urls) / watch.seconds, pss.peak, cpu.by_role())


async def baseline_rows(
    broker: LocalBroker,
    site: object,
    pages: int,
    slots: int,
    checkout: Path,
    env: dict[str, str],
) -> dict[str, Run]:
    """Default isolation on the browser and the HTTP path, this checkout's worker and the
    baseline's alternately (ours, theirs, theirs, ours), so drift hits both alike; then this
    checkout's HTTP path with `store_in_cache: false` beside its default (what storing every
    page in the page cache costs: two Kafka records a page)."""
    base = site.base_url  # type: ignore[attr-defined]
    port = site.port  # type: ignore[attr-defined]
    rows: dict[str, Run] = {}
    for render in ("browser", "http"):
        for n, which in enumerate((None, checkout, checkout, None)):
            label = f"{render}, {which or 'this checkout'} #{n // 2 + 1}"
            urls = _urls(base, pages, f"{render}{n}")
            rows[label] = await service(
                broker, port, urls, slots, extra_env=env, checkout=which, render=render
            )
    stored: dict[bool, list[float]] = {True: [], False: []}
    for n, store in enumerate((False, True, True, False)):
        label = f"http, this checkout, {'stored' if store else 'not stored'} #{n // 2 + 1}"
        urls = _urls(base, pages, f"store{n}")
        rows[label] = await service(
            broker, port, urls, slots, extra_env=env, render="http", store_in_cache=store
        )
        stored[store].append(rows[label].rate)
    for render in ("browser", "http"):
        ours = [rows[f"{render}, this checkout #{n}"].rate for n in (1, 2)]
        theirs = [rows[f"{render}, {checkout} #{n}"].rate for n in (1, 2)]
        ratio = (sum(ours) / len(ours)) / (sum(theirs) / len(theirs))
        print(f"{render} path, this checkout / baseline ({checkout}): {ratio:.3f}")
    ratio = sum(stored[True]) / sum(stored[False])
    print(f"http path, every page stored in the page cache / none stored: {ratio:.3f}")
    return rows


async def _py_spy(pid: int, out: Path) -> asyncio.subprocess.Process:
    out.parent.mkdir(parents=True, exist_ok=True)
    binary = Path(sys.executable).with_name("py-spy")
    return await asyncio.create_subprocess_exec(
        binary, "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
        "--output", str(out), "--nonblocking", stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


def _chromium() -> Path:
    found = system_chromium()
    if found is None:
        raise SystemExit("no system Chromium found")
    return found


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--py-spy", type=Path, default=None)
    parser.add_argument(
        "--no-render-paths", action="store_true", help="skip the render-path rows (faster)"
    )
    parser.add_argument("--log-level", default="warning", help="the worker's CRAWL_LOG_LEVEL")
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="another checkout (with its .venv): its worker's default rows run beside ours"
        " (repeat for several)",
    )
    args = parser.parse_args()
    pages, slots = args.pages, args.concurrency
    log_level = {"CRAWL_LOG_LEVEL": args.log_level}
    async with serve() as site, LocalBroker() as broker:
        await bare_loop(_urls(site.base_url, 40, "warm"), slots)
        before = await bare_loop(_urls(site.base_url, pages, "a"), slots)
        rows = {
            DEFAULT_ROW: await service(
                broker,
                site.port,
                _urls(site.base_url, pages, "b"),
                slots,
                py_spy=args.py_spy,
                extra_env=log_level,
            ),
            AT_LOAD_ROW: await service(
                broker,
                site.port,
                _urls(site.base_url, pages, "l"),
                slots,
                extra_env=log_level | {"CRAWL_RENDER_SETTLE": "0"},
            ),
            DEFAULT_AGAIN_ROW: await service(
                broker,
                site.port,
                _urls(site.base_url, pages, "b2"),
                slots,
                extra_env=log_level,
            ),
            "service, a new context per request": await service(
                broker,
                site.port,
                _urls(site.base_url, pages, "n"),
                slots,
                extra_env=log_level | {"CRAWL_CONTEXT_REUSE": "0"},
            ),
            "service, one shared session": await service(
                broker,
                site.port,
                _urls(site.base_url, pages, "c"),
                slots,
                session="bench",
                extra_env=log_level,
            ),
        }
        for checkout in args.baseline:
            rows |= await baseline_rows(broker, site, pages, slots, checkout, log_level)
        after = await bare_loop(_urls(site.base_url, pages, "d"), slots)
        if not args.no_render_paths:
            await render_rows(broker.bootstrap_servers, site, pages, slots)  # printed first
    bare = (before.rate + after.rate) / 2
    print(f"pages: {pages}, concurrency: {slots}")
    print(f"{'':<36}{'pages/s':>10}{'ratio':>8}{'peak PSS':>14}")
    print(f"{'bare Playwright loop, before':<36}{before.rate:>10.2f}{'':>8}{mib(before.pss):>14}")
    print(f"{'bare Playwright loop, after':<36}{after.rate:>10.2f}{'':>8}{mib(after.pss):>14}")
    for label, run in rows.items():
        print(f"{label:<36}{run.rate:>10.2f}{run.rate / bare:>8.2f}{mib(run.pss):>14}")
    default = rows[DEFAULT_ROW].rate / bare
    print(f"ratio service/bare (default isolation): {default:.2f}")
    settled = (rows[DEFAULT_ROW].rate + rows[DEFAULT_AGAIN_ROW].rate) / 2
    cost = 1 - settled / rows[AT_LOAD_ROW].rate
    print(f"settle cost on static pages: {cost:+.1%} of throughput")
    for line in cpu_lines("bare loop (before)", before.cpu, pages):
        print(line)
    for label, run in rows.items():
        for line in cpu_lines(label, run.cpu, pages):
            print(line)


if __name__ == "__main__":
    asyncio.run(main())
