"""A gateway replica that cannot serve says so: with the broker it reads gone, its `/readyz`
answers 503, and 200 again once the broker is back and its readers serve. A real gateway
process and a broker of the test's own (it is killed and started again)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from gateway import GatewayProcess
from harness import Topics, running_broker

from service.messaging.topics import ensure_topics

pytestmark = pytest.mark.integration

KAFKA_TIMEOUT_S = 5
"""Shorter than the default 30 s: the test waits out the view's question to the gone broker
and then the poll's read, each bounded by it (95 s of waiting with the default, 1 CPU s)."""


async def readiness_becomes(client: httpx.AsyncClient, status: int, deadline_s: float) -> None:
    """Return once `/readyz` answers `status`; TimeoutError past the deadline."""
    async with asyncio.timeout(deadline_s):
        while (await client.get("/readyz")).status_code != status:
            await asyncio.sleep(0.5)


@pytest.mark.long_running
async def test_readyz_is_503_while_the_broker_is_gone_and_200_once_it_is_back(tmp_path):
    """A batch job is started and polled; the broker is killed: `/readyz` answers 503 with
    no call at all (the job view's reads fail), a poll fails with 503 (its reader is replaced,
    and cannot be while the broker is gone) and the process keeps answering `/healthz`; the
    broker restarts on the same port and data: `/readyz` answers 200 again and the job's poll
    is answered."""
    async with running_broker(data_dir=tmp_path / "kafka") as broker:
        topics = Topics(bootstrap=broker.bootstrap_servers)
        await ensure_topics(topics.settings())
        env = topics.env(CRAWL_KAFKA_TIMEOUT=str(KAFKA_TIMEOUT_S))
        gateway = GatewayProcess(env, tmp_path / "gateway.log", "g1")
        try:
            await gateway.start()
            async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
                started = await client.post(
                    "/v2/batch/scrape", json={"urls": ["https://example.com/"]}
                )
                assert started.status_code == 200, started.text
                job = started.json()["id"]
                assert (await client.get(f"/v2/batch/scrape/{job}")).status_code == 200
                await broker.kill()
                await readiness_becomes(client, 503, 120)
                polled = await client.get(f"/v2/batch/scrape/{job}")
                alive = (await client.get("/healthz")).status_code
                await broker.restart()
                await readiness_becomes(client, 200, 180)
                again = await client.get(f"/v2/batch/scrape/{job}")
        finally:
            await gateway.close()
    assert polled.status_code == 503, polled.text
    assert alive == 200
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "scraping"
