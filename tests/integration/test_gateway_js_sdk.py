"""The official JavaScript SDK (`@mendable/firecrawl-js`, pinned in tests/js) against the
gateway: scrape, crawl's waiter, startCrawl + getCrawlStatus over more than 100 documents,
batchScrape, map; real broker, worker and Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

JS = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node")
CHECK_DEADLINE_S = 420.0


@pytest.mark.skipif(
    NODE is None or not (JS / "node_modules").is_dir(),
    reason="node or tests/js/node_modules missing (make setup installs them with npm ci)",
)
async def test_the_javascript_sdk_works_as_written(start_worker, start_gateway, site):
    """Every call of tests/js/sdk_check.mjs answers what Firecrawl's would."""
    await start_worker()
    gateway = await start_gateway()
    assert NODE is not None
    process = await asyncio.create_subprocess_exec(
        NODE,
        "sdk_check.mjs",
        cwd=JS,
        env=os.environ | {"GATEWAY_URL": gateway.url, "SITE_URL": site.url("/")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CHECK_DEADLINE_S)
    assert process.returncode == 0, err.decode()[-3000:]
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert "Page 3" in seen["scrape"]["markdown"]
    assert "<h1>Page 3</h1>" in seen["scrape"]["html"]
    assert site.url("/page/4") in seen["scrape"]["links"]
    assert seen["scrape"]["status"] == 200
    assert seen["crawl"]["status"] == "completed"
    assert len(set(seen["crawl"]["sources"])) == 8
    assert seen["paged"]["status"] == "completed"
    assert len(set(seen["paged"]["sources"])) == len(seen["paged"]["sources"]) == 105
    assert seen["paged"]["completed"] == 105
    assert sorted(seen["batch"]["sources"]) == [site.url("/page/1"), site.url("/page/2")]
    assert site.url("/") in seen["map"]
    assert site.url("/page/0") in seen["map"]
