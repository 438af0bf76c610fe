"""Webhooks through `crawlstream webhooks`: signed, in order, every page, across the death of
a gateway and of the worker running the crawl; private webhook targets refused."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
import pytest
from aiohttp import web
from firecrawl import Firecrawl
from gateway import DispatcherProcess, GatewayProcess, free_port, running_gateway
from harness import wait_for_group
from waiting import until

from service.client import CrawlClient
from service.webhooks import verify

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from harness import Topics
    from testsite import TestSite

pytestmark = pytest.mark.integration

SECRET = "whsec-test-secret"  # noqa: S105 - a test key for a local receiver


@dataclass
class Receiver:
    """A webhook receiver: every delivery's raw body and signature header."""

    port: int
    deliveries: list[tuple[bytes, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def bodies(self) -> list[dict]:
        return [json.loads(raw) for raw, _ in self.deliveries]

    def unique(self) -> list[dict]:
        """The first delivery of each event id, in arrival order."""
        seen: dict[str, dict] = {}
        for body in self.bodies():
            seen.setdefault(body["eventId"], body)
        return list(seen.values())


@asynccontextmanager
async def receiving() -> AsyncIterator[Receiver]:
    receiver = Receiver(port=free_port())

    async def hook(request: web.Request) -> web.Response:
        receiver.deliveries.append(
            (await request.read(), request.headers.get("X-Firecrawl-Signature", ""))
        )
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", receiver.port).start()
    try:
        yield receiver
    finally:
        await runner.cleanup()


STATIC = {"CRAWL_STATIC_MEMBERSHIP": "true"}
"""The killed worker is started again as the same static member (`group.instance.id`): it
takes its partitions back at once, where a survivor would wait for the dead member's 30 s
session timeout. A new process resumes the crawl either way, which is what the webhooks must
survive; a survivor's takeover is test_worker_flow's and test_deep_crawl's."""


async def test_every_event_arrives_signed_and_in_order_after_a_gateway_and_a_worker_die(
    topics: Topics, start_worker, collector, site: TestSite, tmp_path
):
    """started, one page per document, completed: each signature verifies, although the
    gateway and the worker running the crawl were killed during it (the worker is started
    again under its name)."""
    async with receiving() as receiver:
        allowed = f"127.0.0.1:{site.port},127.0.0.1:{receiver.port}"
        env = topics.env(CRAWL_ALLOWED_HOSTS=allowed, CRAWL_WEBHOOK_SECRET=SECRET)
        workers = {
            name: await start_worker(name, CRAWL_ALLOWED_HOSTS=allowed, **STATIC)
            for name in ("w1", "w2")
        }
        await wait_for_group(topics, 2)
        dispatcher = DispatcherProcess(env, tmp_path / "d1.log", "d1")
        first = GatewayProcess(env, tmp_path / "g1.log", "g1")
        second = GatewayProcess(env, tmp_path / "g2.log", "g2")
        try:
            await dispatcher.start()
            await first.start()
            started = await asyncio.to_thread(
                Firecrawl(api_key="fc-x", api_url=first.url).start_crawl,
                site.url("/"),
                limit=40,
                include_paths=["^/page/"],
                webhook={"url": receiver.url, "metadata": {"order": "42"}},
            )
            pages = lambda: [b for b in receiver.unique() if b["type"] == "crawl.page"]  # noqa: E731
            await until(lambda: len(pages()) >= 5, 120, every_s=0.2)
            await first.kill()
            [owner] = {e.worker for e in collector.seen.events_of(started.id)}
            await workers[owner].kill()
            again = await start_worker(
                f"{owner}-again", CRAWL_WORKER_NAME=owner, CRAWL_ALLOWED_HOSTS=allowed, **STATIC
            )
            await second.start()
            done = lambda: any(b["type"] == "crawl.completed" for b in receiver.bodies())  # noqa: E731
            await until(done, 240, every_s=0.2)
            job = await asyncio.to_thread(
                Firecrawl(api_key="fc-x", api_url=second.url).get_crawl_status, started.id
            )
        finally:
            await dispatcher.close()
            await first.close()
            await second.close()
    assert all(verify(SECRET, raw, header) for raw, header in receiver.deliveries)
    events = receiver.unique()
    assert events[0]["type"] == "crawl.started"
    assert events[-1]["type"] == "crawl.completed"
    page_events = [b for b in events if b["type"] == "crawl.page"]
    urls = {b["data"][0]["metadata"]["sourceURL"] for b in page_events}
    assert len(urls) == len(page_events) == job.completed == 40
    # a page event repeated after the worker's death is delivered again with its document
    assert all(b["data"] for b in receiver.bodies() if b["type"] == "crawl.page")
    assert all(b["id"] == started.id and b["metadata"] == {"order": "42"} for b in events)
    assert any(e.get("event") == "crawl.resumed" for e in again.events())  # it went on there


@pytest.fixture(scope="module")
async def refusing_gateway(
    shared_topics: Topics, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayProcess]:
    """One gateway replica with default settings on topics of the module (no worker: what it
    refuses is never produced), shared by the refusal tests, which neither configure nor stop
    it."""
    log = tmp_path_factory.mktemp("refusing-gateway") / "g.log"
    async with running_gateway(shared_topics.env(), log, "g") as gateway:
        yield gateway


@pytest.mark.parametrize("target", ["http://10.1.2.3/hook", "http://127.0.0.1:9/hook"])
async def test_a_webhook_to_a_private_address_is_refused(refusing_gateway: GatewayProcess, target):
    """A webhook URL the egress policy forbids gets Firecrawl's 400 naming `webhook.url`."""
    gateway = refusing_gateway
    async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as client:
        answer = await client.post(
            "/v2/crawl",
            json={"url": "https://example.com/", "webhook": {"url": target}},
        )
    assert answer.status_code == 400
    assert "webhook.url" in answer.json()["error"]


async def test_a_kafka_producers_request_gets_its_webhooks_too(
    topics: Topics, start_worker, site: TestSite, tmp_path
):
    """A request produced with the Python client (no gateway) and `metadata.webhook` gets
    started, a page per URL with its document, completed."""
    async with receiving() as receiver:
        allowed = f"127.0.0.1:{site.port},127.0.0.1:{receiver.port}"
        metrics_port = free_port()
        env = topics.env(
            CRAWL_ALLOWED_HOSTS=allowed,
            CRAWL_WEBHOOK_SECRET=SECRET,
            CRAWL_METRICS_PORT=str(metrics_port),
        )
        await start_worker(CRAWL_ALLOWED_HOSTS=allowed)
        dispatcher = DispatcherProcess(env, tmp_path / "d1.log", "d1")
        urls = [site.url(f"/page/{n}") for n in range(3)]
        try:
            await dispatcher.start()
            async with CrawlClient(topics.settings()) as client:
                submission = await client.submit(urls, metadata={"webhook": receiver.url})
            done = lambda: any(b["type"] == "crawl.completed" for b in receiver.bodies())  # noqa: E731
            await until(done, 120, every_s=0.2)
            async with httpx.AsyncClient(timeout=10) as client:
                metrics = (await client.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
                ready = await client.get(f"http://127.0.0.1:{metrics_port}/readyz")
        finally:
            await dispatcher.close()
    assert 'crawl_webhook_events_total{outcome="delivered"} 5.0' in metrics
    assert ready.status_code == 200
    events = receiver.unique()
    assert events[0]["type"] == "crawl.started"
    assert events[-1]["type"] == "crawl.completed"
    pages = [b for b in events if b["type"] == "crawl.page"]
    assert sorted(b["data"][0]["metadata"]["sourceURL"] for b in pages) == urls
    assert all("Page" in b["data"][0]["markdown"] for b in pages)
    assert all(b["id"] == submission.request_id for b in events)
    assert all(verify(SECRET, raw, header) for raw, header in receiver.deliveries)
