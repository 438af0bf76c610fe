"""The HTTP path of this checkout beside another's, over more rows than `bench/throughput.py`.

    .venv/bin/python bench/http_path.py --baseline PATH [--pages 600] [--rounds 3]

One broker and the throughput benchmark's site (`bench/throughput.py`: requests of 10 URLs
asking for markdown, links and metadata, default settings but the host limit, `render:
http`); one `crawlstream worker` at a time, this checkout's and the baseline's (a checkout
with its own `.venv`) in the order ours, theirs, theirs, ours, `--rounds` times. HTTP rows of
one checkout differ by up to 30% within a run, so the ratio of the summed pages/s over many
rows is what to compare. Prints each row's pages/s, peak PSS and CPU-ms a page by role, then
the ratios ours / theirs of pages/s and of CPU a page.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from _common import mib
from testsite import serve
from throughput import Run, _urls, cpu_ms, service

from service.broker import LocalBroker

SLOTS = 8


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pages = args.pages
    rows: dict[str, list[Run]] = {"ours": [], "theirs": []}
    env = {"CRAWL_LOG_LEVEL": "warning"}
    async with serve() as site, LocalBroker() as broker:
        warm = _urls(site.base_url, 100, "warm")
        await service(broker, site.port, warm, SLOTS, render="http", extra_env=env)
        for n, who in enumerate(("ours", "theirs", "theirs", "ours") * args.rounds):
            checkout = None if who == "ours" else args.baseline
            urls = _urls(site.base_url, pages, f"http{n}")
            run = await service(
                broker, site.port, urls, SLOTS, render="http", checkout=checkout, extra_env=env
            )
            rows[who].append(run)
            roles = ", ".join(f"{k} {v * 1000 / pages:.2f}" for k, v in sorted(run.cpu.items()))
            print(
                f"{who:<7}{run.rate:>8.1f} pages/s {mib(run.pss):>10}  CPU-ms: {roles}", flush=True
            )
    rate = {who: sum(run.rate for run in runs) for who, runs in rows.items()}
    cpu = {who: sum(cpu_ms(run, pages) for run in runs) for who, runs in rows.items()}
    print(
        f"http path, pages/s, this checkout / {args.baseline}: {rate['ours'] / rate['theirs']:.3f}"
    )
    print(
        f"http path, CPU a page, this checkout / {args.baseline}: {cpu['ours'] / cpu['theirs']:.3f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
