"""`crawlstream demo`: a broker, a worker and the bundled sample site, one request end to end."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from service.broker import LocalBroker
from service.broker.local import free_port
from service.cli.follow_view import follow_live
from service.client import CrawlClient
from service.contracts import CrawlOptions, CrawlSpec
from service.logs import configure_logging
from service.messaging.topics import ensure_topics, ready_partitions
from service.metrics import Metrics
from service.worker.app import Worker

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from service.settings import Settings

SAMPLE_PAGES = (
    "index.html",
    "about.html",
    "features.html",
    "backpressure.html",
    "late.html",
    "contact.html",
)


@contextlib.asynccontextmanager
async def sample_site() -> AsyncIterator[str]:
    """Serve the bundled sample site on 127.0.0.1; yields its base URL."""
    root = resources.files("service").joinpath("sample_site")
    with resources.as_file(root) as path:
        app = web.Application()
        app.router.add_static("/", path)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            await runner.cleanup()


@contextlib.asynccontextmanager
async def _kafka(settings: Settings) -> AsyncIterator[str]:
    if "kafka_bootstrap_servers" in settings.model_fields_set:
        yield settings.kafka_bootstrap_servers
        return
    print("Starting a local Kafka broker (the first start resolves its jars with Maven)...")  # noqa: T201
    async with LocalBroker() as broker:
        yield broker.bootstrap_servers


@contextlib.contextmanager
def logs_to_file(settings: Settings) -> Iterator[Path]:
    """The broker's, the worker's and the client's log lines go to a new file, not between the
    progress bars; standard error has them again afterwards."""
    descriptor, name = tempfile.mkstemp(prefix="crawlstream-demo-", suffix=".log")
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        configure_logging(settings, stream)
        try:
            yield Path(name)
        finally:
            configure_logging(settings)


async def demo(settings: Settings) -> int:
    with logs_to_file(settings) as log_path:
        print(f"Logs go to {log_path}")  # noqa: T201
        try:
            return await _demo(settings)
        finally:
            print(f"The demo's logs are in {log_path}")  # noqa: T201


async def _demo(settings: Settings) -> int:
    async with _kafka(settings) as bootstrap, sample_site() as base_url:
        host = base_url.removeprefix("http://")
        settings = settings.model_copy(
            update={
                "kafka_bootstrap_servers": bootstrap,
                "allowed_hosts": [host],
                "metrics_port": 0,
            }
        )
        await ensure_topics(settings)
        await ready_partitions(settings)  # the client below looks the topics up at once
        worker = Worker(settings, Metrics())
        running = asyncio.create_task(worker.run())
        crawling = asyncio.create_task(_crawl(settings, base_url))
        try:
            await asyncio.wait({running, crawling}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            worker.stop()
            crawling.cancel()
            await running
    return crawling.result()


async def _crawl(settings: Settings, base_url: str) -> int:
    """A list crawl of the sample pages, then a deep crawl of the site from its home page."""
    urls = [f"{base_url}/{page}" for page in SAMPLE_PAGES]
    options = CrawlOptions()  # the defaults: script-rendered content is waited for
    async with CrawlClient(settings) as client:
        submission = await client.submit(urls, options)
        print(f"Submitted request {submission}\n  {len(urls)} pages of {base_url}")  # noqa: T201
        listed = await follow_live(client, submission)
        seed = f"{base_url}/index.html"
        deep = await client.submit([seed], options, crawl=CrawlSpec(max_pages=20, max_depth=2))
        print(f"Submitted deep crawl {deep}\n  from {seed}, depth 2, at most 20 pages")  # noqa: T201
        crawled = await follow_live(client, deep)
    return listed or crawled
