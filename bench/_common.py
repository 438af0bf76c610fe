"""Shared pieces of the benchmarks: the test site, a PSS sampler, a worker process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Self

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))

from service.backpressure._proctree import tree_memory  # noqa: E402
from service.contracts import ProgressEvent  # noqa: E402
from service.settings import Settings  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from aiokafka import AIOKafkaConsumer

PSS_INTERVAL_S = 0.5


class PeakPss:
    """Samples the summed PSS of a process tree in the background; keeps the peak."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[PeakPss]:
        task = asyncio.create_task(self._loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            value = await asyncio.to_thread(tree_memory, Path("/proc"), self.pid)
            self.peak = max(self.peak, value)
            await asyncio.sleep(PSS_INTERVAL_S)


def mib(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB"


class Stopwatch:
    def __enter__(self) -> Self:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = time.perf_counter() - self.start


def bench_settings(bootstrap: str, prefix: str) -> Settings:
    """The settings of a bench worker's topics, as `worker_env` names them."""
    return Settings(
        kafka_bootstrap_servers=bootstrap,
        requests_topic=f"{prefix}.requests",
        results_topic=f"{prefix}.results",
        progress_topic=f"{prefix}.progress",
        dead_letter_topic=f"{prefix}.dead-letter",
    )


def worker_env(bootstrap: str, prefix: str, site_port: int, **extra: str) -> dict[str, str]:
    return (
        os.environ
        | {
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "CRAWL_REQUESTS_TOPIC": f"{prefix}.requests",
            "CRAWL_RESULTS_TOPIC": f"{prefix}.results",
            "CRAWL_PROGRESS_TOPIC": f"{prefix}.progress",
            "CRAWL_DEAD_LETTER_TOPIC": f"{prefix}.dead-letter",
            "CRAWL_GROUP_ID": f"{prefix}-group",
            "CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site_port}",
            "CRAWL_METRICS_PORT": "0",
            "CRAWL_LOG_FORMAT": "json",
            "CRAWL_LOG_LEVEL": "warning",
        }
        | extra
    )


async def until_terminal(consumer: AIOKafkaConsumer, pending: set[str]) -> None:
    """Read progress events until every request of `pending` had its terminal event;
    `pending` is emptied as they come (what is left when the caller's deadline cuts in)."""
    async for record in consumer:
        event = ProgressEvent.model_validate_json(record.value)
        if event.is_terminal:
            pending.discard(event.request_id)
            if not pending:
                return
