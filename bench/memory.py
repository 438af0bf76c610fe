"""The memory governor under hard limits, on and off, side by side in one run.

    .venv/bin/python bench/memory.py [--pages 60]

For each limit (1 GiB, 2 GiB, none) and governor on/off, one worker runs in a fresh memory
cgroup (v1 or v2, as root) and crawls pages whose scripts allocate 60-150 MB each, in 10-URL
requests. Prints pages/s, pages with a result, peak cgroup usage against the limit, consumer
pauses, and OOM kills recorded by the cgroup.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid

from _common import ROOT, mib, worker_env
from cgroups import MemoryCgroup, writable_hierarchy
from harness import Topics, WorkerProcess, collecting, produce
from testsite import serve

from service.broker import LocalBroker
from service.contracts import CrawlOptions, CrawlRequest, dump
from service.messaging.topics import ensure_topics

RUN_DEADLINE_S = 300.0
"""A configuration that has not finished by then is reported as unfinished."""

UNLIMITED = 64 * 2**30
"""The cgroup limit used for 'none': far above the machine's memory."""


async def one_run(
    bootstrap: str, site: object, pages: int, limit: int | None, governor: bool
) -> dict[str, object]:
    topics = Topics(bootstrap=bootstrap, prefix=f"mem{uuid.uuid4().hex[:6]}")
    await ensure_topics(topics.settings())
    env = worker_env(
        bootstrap,
        topics.prefix,
        site.port,  # type: ignore[attr-defined]
        CRAWL_MEMORY_GOVERNOR=str(governor).lower(),
        CRAWL_LOG_LEVEL="info",
    )
    log_path = ROOT / ".bench" / f"{topics.prefix}.log"
    log_path.parent.mkdir(exist_ok=True)
    requests = {
        f"{topics.prefix}-{r}": [
            site.url(f"/alloc?mb={60 + (n * 37) % 91}&hold=1&n={n}")  # type: ignore[attr-defined]
            for n in range(r * 10, min(r * 10 + 10, pages))
        ]
        for r in range((pages + 9) // 10)
    }
    options = CrawlOptions(wait_for="#done", timeout_ms=60_000, formats=["text"])
    with MemoryCgroup(limit or UNLIMITED) as cgroup:
        worker = WorkerProcess(env, log_path, "bench", cgroup.join_current)
        async with collecting(topics) as collector:
            await worker.start()
            started = time.perf_counter()
            await produce(
                topics,
                [
                    (rid.encode(), dump(CrawlRequest(request_id=rid, urls=urls, options=options)))
                    for rid, urls in requests.items()
                ],
            )
            finished = True
            try:
                await collector.wait_until(
                    lambda seen: (
                        all(seen.terminal(rid) for rid in requests)
                        or worker.process.returncode is not None
                    ),  # type: ignore[union-attr]
                    RUN_DEADLINE_S,
                )
            except TimeoutError:
                finished = False
            elapsed = time.perf_counter() - started
            finished = finished and all(collector.seen.terminal(rid) for rid in requests)
            with contextlib.suppress(TimeoutError):
                await worker.terminate(deadline_s=60)
            await worker.close()
            results = {r.result_id for r, _ in collector.seen.results}
            ok = {r.result_id for r, _ in collector.seen.results if r.ok}
        pauses = sum(1 for e in worker.events() if e.get("event") == "memory.pause")
        return {
            "limit": "none" if limit is None else mib(limit),
            "governor": governor,
            "pages/s": len(ok) / elapsed,
            "results": len(results),
            "ok": len(ok),
            "finished": finished,
            "peak": cgroup.peak_bytes(),
            "pauses": pauses,
            "oom_kills": cgroup.oom_kills(),
        }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=60)
    args = parser.parse_args()
    if writable_hierarchy() is None:
        sys.exit("needs a writable memory cgroup (run as root)")
    rows = []
    async with serve() as site, LocalBroker() as broker:
        for limit in (2**30, 2 * 2**30, None):
            for governor in (True, False):
                row = await one_run(broker.bootstrap_servers, site, args.pages, limit, governor)
                print(row, flush=True)
                rows.append(row)
    print(f"\n{args.pages} pages allocating 60-150 MB each, 10 URLs per request")
    print(
        "| limit | governor | pages/s (ok) | ok / pages | finished | peak usage | pauses |"
        " OOM kills |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['limit']} | {'on' if row['governor'] else 'off'} | {row['pages/s']:.2f} |"
            f" {row['ok']} / {args.pages} | {'yes' if row['finished'] else 'no'} |"
            f" {mib(row['peak'])} | {row['pauses']} | {row['oom_kills']} |"
        )  # type: ignore[arg-type]
    unbounded = next(r for r in rows if r["limit"] == "none" and r["governor"])
    at_2g = next(r for r in rows if r["limit"] == mib(2 * 2**30) and r["governor"])
    print(f"governor on, 2 GiB vs none: {at_2g['pages/s'] / unbounded['pages/s']:.2f}")  # type: ignore[operator]


if __name__ == "__main__":
    asyncio.run(main())
