"""One `crawlstream worker` process behind a real broker, fed requests of 10 URLs: the service
side of `throughput.py` and `render_paths.py`."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from _common import ROOT, bench_settings, worker_env
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from service.contracts import CrawlOptions, CrawlRequest, ProgressEvent, dump_request
from service.messaging.topics import ensure_topics

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from aiokafka import ConsumerRecord

    from service.settings import Settings

URLS_PER_REQUEST = 10

START_WAIT_S = 8.0
"""Time given to the worker to join its group and launch Chromium before requests are sent."""


@dataclass(slots=True, kw_only=True)
class BenchWorker:
    prefix: str
    settings: Settings
    process: asyncio.subprocess.Process
    consumer: AIOKafkaConsumer
    producer: AIOKafkaProducer

    async def send(self, urls: list[str], options: CrawlOptions) -> set[str]:
        """Produce `urls` as requests of `URLS_PER_REQUEST`; their request IDs."""
        pending: set[str] = set()
        for n, start in enumerate(range(0, len(urls), URLS_PER_REQUEST)):
            chunk = urls[start : start + URLS_PER_REQUEST]
            request = CrawlRequest(request_id=f"{self.prefix}-{n}", urls=chunk, options=options)
            pending.add(request.request_id)
            await self.producer.send(
                self.settings.requests_topic, dump_request(request), key=request.request_id.encode()
            )
        await self.producer.flush()
        return pending

    async def until_ended(
        self,
        pending: set[str],
        other: Callable[[ConsumerRecord[bytes, bytes]], object] | None = None,
    ) -> None:
        """Read until every request of `pending` had its terminal event; records of other
        topics go to `other`."""
        async for record in self.consumer:
            if record.topic != self.settings.progress_topic:
                if other is not None:
                    other(record)
                continue
            event = ProgressEvent.model_validate_json(record.value)
            if event.is_terminal:
                pending.discard(event.request_id)
                if not pending:
                    return


@contextlib.asynccontextmanager
async def bench_worker(
    bootstrap: str,
    site_port: int,
    slots: int,
    *,
    extra_env: dict[str, str] | None = None,
    results: bool = False,
    checkout: Path | None = None,
) -> AsyncIterator[BenchWorker]:
    """A worker with `slots` page slots (and as many pages per host: the site is one host),
    its own topics, a consumer of its progress topic (and results topic with `results`) from
    now on, and a producer; all stopped afterwards. `checkout`: run the worker of another
    checkout of the project (its own `.venv`), to compare two versions in one run."""
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    env = worker_env(
        bootstrap,
        prefix,
        site_port,
        CRAWL_MAX_PAGE_SLOTS=str(slots),
        CRAWL_MAX_PAGES_PER_HOST=str(slots),
        **(extra_env or {}),
    )
    settings = bench_settings(bootstrap, prefix)
    await ensure_topics(settings)
    log = ROOT / ".bench" / f"{prefix}-worker.log"
    log.parent.mkdir(exist_ok=True)
    with log.open("wb") as stderr:
        python = str(checkout / ".venv" / "bin" / "python") if checkout else sys.executable
        process = await asyncio.create_subprocess_exec(
            python, "-m", "service", "worker", env=env, stderr=stderr, cwd=checkout
        )
    topics = [settings.progress_topic] + ([settings.results_topic] if results else [])
    consumer = AIOKafkaConsumer(
        *topics, bootstrap_servers=bootstrap, auto_offset_reset="latest", group_id=None
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        await consumer.start()
        await asyncio.sleep(START_WAIT_S)
        await producer.start()
        yield BenchWorker(
            prefix=prefix,
            settings=settings,
            process=process,
            consumer=consumer,
            producer=producer,
        )
    finally:
        await producer.stop()
        await consumer.stop()
        process.terminate()
        await process.wait()
