"""What a replica costs while it waits for work: CPU per second of an idle worker's tree.

    .venv/bin/python bench/idle.py [--seconds 60] [--bystanders 300] [--baseline ../old-main]

Starts this checkout's worker (and one of each `--baseline` checkout, with its own `.venv`) on
one broker, all idle at the same time, and counts each tree's CPU (the worker, its content
processes, Playwright's driver, Chromium) over `--seconds`. `--bystanders` sleeping processes
stand for the rest of a busy host (other replicas, sidecars, a test suite): a worker that
looks at every process of the host pays for each of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from _cpu import CpuAccount
from _worker import bench_worker

from service.broker import LocalBroker

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

UNUSED_PORT = 9
"""The site a bench worker may reach: none is asked here."""


@contextlib.asynccontextmanager
async def bystanders(count: int) -> AsyncIterator[None]:
    """`count` sleeping processes, gone afterwards."""
    sleepers = [await asyncio.create_subprocess_exec("sleep", "3600") for _ in range(count)]
    try:
        yield
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            await sleeper.wait()


async def idle_cpu(
    broker: LocalBroker, checkouts: list[Path | None], seconds: float
) -> dict[str, float]:
    """CPU-ms per second of each checkout's idle worker tree, measured side by side."""
    async with contextlib.AsyncExitStack() as stack:
        roots: dict[int, str] = {}
        for checkout in checkouts:
            worker = await stack.enter_async_context(
                bench_worker(broker.bootstrap_servers, UNUSED_PORT, 8, checkout=checkout)
            )
            roots[worker.process.pid] = str(checkout or "this checkout")
        account = CpuAccount(roots)
        async with account.running():
            await asyncio.sleep(seconds)
        per_pid = account.by_root()
    return {roots[pid]: cpu * 1000 / seconds for pid, cpu in per_pid.items()}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--bystanders", type=int, default=300)
    parser.add_argument("--baseline", type=Path, action="append", default=[])
    args = parser.parse_args()
    checkouts: list[Path | None] = [None, *args.baseline]
    async with LocalBroker() as broker:
        quiet = await idle_cpu(broker, checkouts, args.seconds)
        async with bystanders(args.bystanders):
            busy = await idle_cpu(broker, checkouts, args.seconds)
    print(f"CPU-ms per second of an idle worker's tree, over {args.seconds:.0f} s:")
    print(f"  {'checkout':<40}{'quiet host':>12}{f'+{args.bystanders} processes':>18}")
    for name in quiet:
        print(f"  {name:<40}{quiet[name]:>12.1f}{busy[name]:>18.1f}")
    for name in list(quiet)[1:]:
        ours, theirs = quiet["this checkout"], quiet[name]
        print(f"this checkout / {name}: {ours / theirs:.3f} quiet,", end=" ")
        print(f"{busy['this checkout'] / busy[name]:.3f} with the bystanders")


if __name__ == "__main__":
    asyncio.run(main())
