"""What the clients users call send, end to end: page actions through `firecrawl-py` and
`CrawlClient`, and the defaults `firecrawl-py` 4.54 and 4.55 send with a plain `scrape()`.
Real broker, worker, Chromium, gateway replica and the local test site; the tests share one
worker and one gateway (`shared_gateway`), as none configures, restarts or stops them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import httpx
import pytest
from firecrawl import Firecrawl
from firecrawl.v2.types import ExecuteJavascriptAction, WaitAction

from service.client import CrawlClient
from service.contracts import CrawlOptions

if TYPE_CHECKING:
    from pathlib import Path

    from gateway import GatewayProcess
    from harness import Topics
    from testsite import TestSite

pytestmark = pytest.mark.integration

SCRAPE_TIMEOUT_MS = 60_000
PREVIOUS_SDK = "firecrawl-py==4.54.0"
"""The release before the pinned one: it sends `skipTlsVerification: true` by default."""

PREVIOUS_SDK_BODY = {
    "onlyMainContent": True,
    "mobile": False,
    "skipTlsVerification": True,
    "removeBase64Images": True,
    "fastMode": False,
    "blockAds": True,
    "maxAge": 14_400_000,
    "storeInCache": True,
    "formats": ["markdown"],
}
"""What `firecrawl-py` 4.54's `scrape(url)` sends besides the URL (its `prepare_scrape_options`
defaults), for when that release cannot be installed here."""


def sdk(gateway: GatewayProcess) -> Firecrawl:
    return Firecrawl(api_key="fc-test", api_url=gateway.url)


async def test_actions_through_firecrawl_py_run_and_return_their_output(
    shared_gateway: GatewayProcess, site: TestSite
):
    """`scrape` with a wait and a script action (the SDK's own action models) runs both:
    the document has the page and the script's value."""
    gateway = shared_gateway
    doc = await asyncio.to_thread(
        sdk(gateway).scrape,
        site.url("/page/5"),
        actions=[
            WaitAction(milliseconds=5),
            ExecuteJavascriptAction(script="document.title"),
        ],
        timeout=SCRAPE_TIMEOUT_MS,
    )
    assert doc.markdown
    assert doc.actions is not None
    assert doc.actions["javascriptReturns"] == [{"type": "string", "value": "Page 5"}]


async def test_a_wait_action_posted_to_the_gateway_answers_the_document(
    shared_gateway: GatewayProcess, site: TestSite
):
    """`POST /v2/scrape` with `actions: [{type: wait, milliseconds: 5}]` answers 200."""
    gateway = shared_gateway
    body = {"url": site.url("/page/6"), "actions": [{"type": "wait", "milliseconds": 5}]}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=90) as client:
        answer = await client.post("/v2/scrape", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["metadata"]["sourceURL"] == site.url("/page/6")


async def test_actions_submitted_through_crawl_client_run(
    shared_worker, shared_topics: Topics, site: TestSite
):
    """`CrawlClient.crawl` with a wait and a script action gets an ok result with the
    script's value (the record it writes names each step's type)."""
    options = CrawlOptions.model_validate(
        {
            "formats": ["markdown"],
            "actions": [
                {"type": "wait", "milliseconds": 5},
                {"type": "execute_javascript", "script": "document.title"},
            ],
        }
    )
    async with CrawlClient(shared_topics.settings()) as client:
        [result] = await client.crawl([site.url("/page/7")], options, timeout_s=120)
    assert result.ok, result.error
    assert result.actions is not None
    assert result.actions.returns == ["Page 7"]


async def test_the_previous_sdk_release_plain_scrape_works_with_a_warning(
    shared_gateway: GatewayProcess, site: TestSite
):
    """The body `firecrawl-py` 4.54 sends by default (`skipTlsVerification: true`) scrapes
    the page; the document's warning says certificates were verified all the same."""
    gateway = shared_gateway
    body = {"url": site.url("/page/8"), **PREVIOUS_SDK_BODY}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=90) as client:
        answer = await client.post("/v2/scrape", json=body)
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert data["markdown"]
    assert "skipTlsVerification" in data.get("warning", "")


async def test_firecrawl_py_4_54_and_4_55_plain_scrape_both_work(
    shared_gateway: GatewayProcess, site: TestSite, tmp_path: Path
):
    """A plain `scrape(url)` through the pinned SDK and, installed from PyPI into a
    directory of this test, through 4.54."""
    gateway = shared_gateway
    pinned = await asyncio.to_thread(
        sdk(gateway).scrape, site.url("/page/9"), timeout=SCRAPE_TIMEOUT_MS
    )
    assert pinned.markdown
    target = tmp_path / "sdk"
    installed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
         PREVIOUS_SDK],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    if installed.returncode != 0:
        pytest.skip(f"{PREVIOUS_SDK} cannot be installed here: {installed.stderr[-300:]}")
    script = textwrap.dedent(
        f"""
        import firecrawl, importlib.metadata as m
        assert m.version("firecrawl-py") == "4.54.0", m.version("firecrawl-py")
        doc = firecrawl.Firecrawl(api_key="fc-test", api_url={gateway.url!r}).scrape(
            {site.url("/page/10")!r}, timeout={SCRAPE_TIMEOUT_MS})
        print(bool(doc.markdown), getattr(doc, "warning", None))
        """
    )
    env = os.environ | {"PYTHONPATH": str(target)}
    ran = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", script], capture_output=True, text=True,
        timeout=120, env=env, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.startswith("True")
    assert "skipTlsVerification" in ran.stdout
