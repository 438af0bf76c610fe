"""The worker on Chromium's headless shell beside the full Chromium, side by side in one run.

    .venv/bin/python bench/browser_builds.py [--pages 300] [--concurrency 8]
        [--shell /usr/bin/chromium-headless-shell] [--full /usr/bin/chromium]

One broker, the throughput benchmark's site and requests (`bench/throughput.py`: requests
of 10 URLs asking for markdown, links and metadata, default settings but the host limit),
one `crawlstream worker` at a time with `CRAWL_BROWSER_EXECUTABLE` set to each build, in the
order shell, full, full, shell so that drift over the run hits both alike. Prints pages/s,
peak PSS and CPU-ms per page by role of each row, and the ratios shell / full of the mean
pages/s and of the CPU per page (docs/decisions/headless-shell.md).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from _common import mib
from _cpu import cpu_lines
from testsite import serve
from throughput import Run, _urls, cpu_ms, service

from service.broker import LocalBroker


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--shell", type=Path, default=Path("/usr/bin/chromium-headless-shell"))
    parser.add_argument("--full", type=Path, default=Path("/usr/bin/chromium"))
    args = parser.parse_args()
    for build in (args.shell, args.full):
        if not build.exists():
            raise SystemExit(f"{build} does not exist")
    pages, slots = args.pages, args.concurrency
    builds = {"shell": args.shell, "full": args.full}
    rows: dict[str, Run] = {}
    async with serve() as site, LocalBroker() as broker:
        warm = {"CRAWL_BROWSER_EXECUTABLE": str(args.full)}
        await service(broker, site.port, _urls(site.base_url, 40, "warm"), slots, extra_env=warm)
        for n, name in enumerate(("shell", "full", "full", "shell")):
            label = f"{name} #{n // 2 + 1}"
            env = {"CRAWL_BROWSER_EXECUTABLE": str(builds[name]), "CRAWL_LOG_LEVEL": "warning"}
            urls = _urls(site.base_url, pages, f"{name}{n}")
            rows[label] = await service(broker, site.port, urls, slots, extra_env=env)
    print(f"pages: {pages}, concurrency: {slots}")
    print(f"{'':<12}{'pages/s':>10}{'CPU-ms/page':>14}{'peak PSS':>14}")
    for label, run in rows.items():
        print(f"{label:<12}{run.rate:>10.2f}{cpu_ms(run, pages):>14.1f}{mib(run.pss):>14}")
    for label, run in rows.items():
        for line in cpu_lines(label, run.cpu, pages):
            print(line)
    rate = {name: sum(rows[f"{name} #{n}"].rate for n in (1, 2)) for name in builds}
    cpu = {name: sum(cpu_ms(rows[f"{name} #{n}"], pages) for n in (1, 2)) for name in builds}
    print(f"pages/s, shell / full: {rate['shell'] / rate['full']:.3f}")
    print(f"CPU per page, shell / full: {cpu['shell'] / cpu['full']:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
