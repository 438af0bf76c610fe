"""API keys and tenant limits at the gateway, over two replicas: real broker and workers."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import TYPE_CHECKING

import httpx
import pytest
from firecrawl import Firecrawl
from firecrawl.v2.utils.error_handler import FirecrawlError
from gateway import GatewayProcess, gateway_starter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from harness import Topics
    from testsite import TestSite

pytestmark = pytest.mark.integration

KEY = "fc-acme-test-key"
OPERATOR = "operator-metrics-key"


@pytest.fixture
async def keyed_gateways(
    topics: Topics, tmp_path: Path
) -> AsyncIterator[Callable[[str], Awaitable[GatewayProcess]]]:
    """Gateways reading one keys file: tenant `acme`, one job at a time."""
    keys = tmp_path / "keys.json"
    entry = {"key": KEY, "tenant": "acme", "max_concurrent_jobs": 1, "pages_per_minute": 10_000}
    keys.write_text(json.dumps({"keys": [entry]}))
    env = functools.partial(
        topics.env, CRAWL_GATEWAY_KEYS_FILE=str(keys), CRAWL_GATEWAY_METRICS_KEY=OPERATOR
    )
    async with gateway_starter(env, tmp_path) as start:
        yield start


async def test_without_a_valid_key_every_v2_endpoint_is_401(keyed_gateways, site: TestSite):
    """No key, or a wrong one: 401 in Firecrawl's shape; the probes stay open."""
    gateway = await keyed_gateways("g1")
    async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as client:
        body = {"url": site.url("/page/1")}
        missing = await client.post("/v2/scrape", json=body)
        wrong = await client.post(
            "/v2/crawl", json=body, headers={"Authorization": "Bearer fc-nope-nope"}
        )
        status = await client.get("/v2/crawl/9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d")
        ready = await client.get("/readyz")
    assert [missing.status_code, wrong.status_code, status.status_code] == [401, 401, 401]
    assert missing.json()["success"] is False
    assert ready.status_code == 200
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(
            Firecrawl(api_key="fc-wrong", api_url=gateway.url).scrape, body["url"]
        )
    assert raised.value.status_code == 401


async def test_a_tenant_over_its_job_limit_gets_429_also_through_another_replica(
    start_worker, keyed_gateways, site: TestSite
):
    """One job running (started through g1): the next one through g2 gets 429 with
    Retry-After; once the first is cancelled and ended, g2 admits a new one."""
    await start_worker()
    first, second = await keyed_gateways("g1"), await keyed_gateways("g2")
    sdk_first = Firecrawl(api_key=KEY, api_url=first.url)
    sdk_second = Firecrawl(api_key=KEY, api_url=second.url)
    running = await asyncio.to_thread(
        sdk_first.start_crawl, site.url("/"), limit=500, include_paths=["^/page/"]
    )
    async with httpx.AsyncClient(base_url=second.url, timeout=30) as client:
        refused = await client.post(
            "/v2/crawl",
            json={"url": site.url("/"), "limit": 5},
            headers={"Authorization": f"Bearer {KEY}"},
        )
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert "limit is 1" in refused.json()["error"]
    async with httpx.AsyncClient(base_url=second.url, timeout=10) as client:
        metrics = (
            await client.get("/metrics", headers={"Authorization": f"Bearer {OPERATOR}"})
        ).text
    assert 'route="/v2/crawl",status="429",tenant="acme"' in metrics
    concurrency = await asyncio.to_thread(sdk_second.get_concurrency)
    assert (concurrency.concurrency, concurrency.max_concurrency) == (1, 1)

    assert await asyncio.to_thread(sdk_second.cancel_crawl, running.id)
    async with asyncio.timeout(60):
        while (
            await asyncio.to_thread(sdk_second.get_crawl_status, running.id)
        ).status != "cancelled":
            await asyncio.sleep(0.5)
    admitted = await asyncio.to_thread(sdk_second.start_crawl, site.url("/"), limit=2)
    assert admitted.id
