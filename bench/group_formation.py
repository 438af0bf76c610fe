"""How long workers started together take to hold every request partition between them.

Two scenarios, 10 tries each (issue 18), each try printed:

- `fresh broker, 2 workers`: a new broker (no `__consumer_offsets` yet), two workers started
  0.15 s apart, 36 requests produced 5 s after the first start; the try ends when all 36 ended.
- `new group, 3 workers`: three workers started at the same moment on a new group of one
  broker that has served groups before.

"Held" is read from the workers' own logs (`consumer.assigned` / `consumer.revoked`): the
moment the partitions every worker holds cover the topic, each worker holding some.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from _common import ROOT, bench_settings, until_terminal, worker_env
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from testsite import serve

from service.broker import LocalBroker
from service.contracts import CrawlOptions, CrawlRequest, dump_request
from service.messaging.topics import ensure_topics

if TYPE_CHECKING:
    from pathlib import Path

TRIES = 10
PARTITIONS = 12
"""`CRAWL_REQUESTS_PARTITIONS`' default."""
HOLD_DEADLINE_S = 120.0
WORK_DEADLINE_S = 120.0
REQUESTS = 36


@dataclass(slots=True)
class Worker:
    log: Path
    process: asyncio.subprocess.Process
    held: set[int] = field(default_factory=set)

    def read_holdings(self, since: float) -> list[tuple[float, set[int]]]:
        """(seconds after `since`, partitions held) after each assignment change."""
        changes: list[tuple[float, set[int]]] = []
        for line in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                event = entry.get("event")
                if event in {"consumer.assigned", "consumer.revoked"}:
                    at = _epoch(entry["timestamp"]) - since
                    parts = set(entry["partitions"])
                    self.held = parts if event == "consumer.assigned" else self.held - parts
                    changes.append((at, set(self.held)))
        return changes


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


async def start_workers(
    bootstrap: str, prefix: str, site_port: int, count: int, gap_s: float
) -> list[Worker]:
    env = worker_env(bootstrap, prefix, site_port, CRAWL_LOG_LEVEL="info")
    workers = []
    for n in range(count):
        log = ROOT / ".bench" / f"{prefix}-w{n}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "service", "worker", env=env, stderr=stderr
            )
        workers.append(Worker(log=log, process=process))
        if gap_s:
            await asyncio.sleep(gap_s)
    return workers


def held_at(workers: list[Worker], since: float) -> float | None:
    """When all partitions were first held, each worker holding some (None: not yet)."""
    timeline = sorted(
        (at, index, held)
        for index, worker in enumerate(workers)
        for at, held in worker.read_holdings(since)
    )
    state: dict[int, set[int]] = {}
    for at, index, held in timeline:
        state[index] = held
        covered = set().union(*state.values())
        if len(covered) == PARTITIONS and len(state) == len(workers) and all(state.values()):
            return at
    return None


async def wait_held(workers: list[Worker], since: float) -> float | None:
    end = time.time() + HOLD_DEADLINE_S
    while time.time() < end:
        found = held_at(workers, since)
        if found is not None:
            return found
        await asyncio.sleep(0.25)
    return None


async def stop(workers: list[Worker]) -> None:
    for worker in workers:
        with contextlib.suppress(ProcessLookupError):
            worker.process.terminate()
    for worker in workers:
        await asyncio.wait_for(worker.process.wait(), 60)


async def produce_and_finish(bootstrap: str, prefix: str, url: str) -> int:
    """Produce `REQUESTS` 1-URL requests; how many ended within the deadline."""
    settings = bench_settings(bootstrap, prefix)
    consumer = AIOKafkaConsumer(
        settings.progress_topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await consumer.start()
    await producer.start()
    pending = set()
    try:
        for n in range(REQUESTS):
            request = CrawlRequest(
                request_id=f"{prefix}-{uuid.uuid4().hex[:8]}-{n}",
                urls=[url],
                options=CrawlOptions(render="http"),
            )
            pending.add(request.request_id)
            await producer.send(
                settings.requests_topic, dump_request(request), key=request.request_id.encode()
            )
        await producer.flush()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(WORK_DEADLINE_S):
                await until_terminal(consumer, pending)
    finally:
        await producer.stop()
        await consumer.stop()
    return REQUESTS - len(pending)


async def fresh_broker_two_workers(site_port: int, url: str) -> tuple[float | None, int]:
    async with LocalBroker() as broker:
        bootstrap = broker.bootstrap_servers
        prefix = f"gf{uuid.uuid4().hex[:6]}"
        await ensure_topics(bench_settings(bootstrap, prefix))
        since = time.time()
        workers = await start_workers(bootstrap, prefix, site_port, 2, gap_s=0.15)
        try:
            await asyncio.sleep(5.0 - (time.time() - since))
            ended = await produce_and_finish(bootstrap, prefix, url)
            return await wait_held(workers, since), ended
        finally:
            await stop(workers)


async def new_group_three_workers(bootstrap: str, site_port: int) -> float | None:
    prefix = f"gf{uuid.uuid4().hex[:6]}"
    await ensure_topics(bench_settings(bootstrap, prefix))
    since = time.time()
    workers = await start_workers(bootstrap, prefix, site_port, 3, gap_s=0.0)
    try:
        return await wait_held(workers, since)
    finally:
        await stop(workers)


def show(value: float | None) -> str:
    return "never" if value is None else f"{value:5.1f} s"


async def main() -> None:
    async with serve() as site:
        url = f"http://127.0.0.1:{site.port}/"
        print(f"fresh broker, 2 workers 0.15 s apart, {REQUESTS} requests 5 s later:")
        for n in range(TRIES):
            held, ended = await fresh_broker_two_workers(site.port, url)
            print(
                f"  try {n + 1:2}: all {PARTITIONS} partitions held {show(held)} after start,"
                f" {ended}/{REQUESTS} requests ended",
                flush=True,
            )
        print("new group, 3 workers started at the same moment:")
        async with LocalBroker() as broker:
            await ensure_topics(bench_settings(broker.bootstrap_servers, "gfwarm"))
            for n in range(TRIES):
                held = await new_group_three_workers(broker.bootstrap_servers, site.port)
                print(
                    f"  try {n + 1:2}: all {PARTITIONS} partitions held {show(held)} after start",
                    flush=True,
                )


if __name__ == "__main__":
    asyncio.run(main())
