"""Agents through MCP, driven by the official MCP Python client: `crawlstream mcp` (stdio), the
gateway's `/mcp` (streamable HTTP, with a tenant's key; refused without one), and Firecrawl's
own `firecrawl-mcp` (npm, pinned in tests/js) pointed at the gateway. One worker and one
gateway for the module; real broker, Chromium and the local test site."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from gateway import GatewayProcess, running_gateway
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from harness import Topics
    from testsite import TestSite

pytestmark = pytest.mark.integration

KEY = "fc-mcp-agent-key"
CORE_TOOLS = {
    "firecrawl_scrape",
    "firecrawl_map",
    "firecrawl_crawl",
    "firecrawl_check_crawl_status",
}
CRAWL_DEADLINE_S = 180.0
"""From a crawl's start to `completed` (five pages of the test site, under load)."""
CALL_TIMEOUT_S = 180.0
"""The client's wait for one tool call (firecrawl-mcp's crawl tool polls to the end)."""
JS = Path(__file__).resolve().parents[1] / "js"
FIRECRAWL_MCP = JS / "node_modules" / "firecrawl-mcp" / "dist" / "index.js"
NODE = shutil.which("node")


@pytest.fixture(scope="module")
async def keyed_gateway(
    shared_topics: Topics, shared_worker, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayProcess]:
    """One gateway with a keys file (tenant `agents`), on the module's worker's topics."""
    folder = tmp_path_factory.mktemp("mcp")
    keys = folder / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": KEY, "tenant": "agents"}]}))
    env = shared_topics.env(CRAWL_GATEWAY_KEYS_FILE=str(keys))
    async with running_gateway(env, folder / "gateway.log", "mcp-gateway") as gateway:
        yield gateway


@asynccontextmanager
async def stdio_session(
    command: str, args: list[str], env: dict[str, str], log: Path
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=command, args=args, env=env)
    with log.open("a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(url: str, key: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_S) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments, read_timeout_seconds=CALL_TIMEOUT_S)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    assert not result.is_error, text
    return text, result.structured_content


async def crawl_to_the_end(session: ClientSession, job_id: str) -> tuple[str, list[dict]]:
    """Poll `firecrawl_check_crawl_status`, following its cursors, until the crawl ended and
    every document was read; the final status and the documents."""
    documents: list[dict] = []
    cursor = None
    async with asyncio.timeout(CRAWL_DEADLINE_S):
        while True:
            arguments = {"id": job_id} | ({"cursor": cursor} if cursor else {})
            _, status = await call(session, "firecrawl_check_crawl_status", **arguments)
            documents += status["data"]
            cursor = status["next"] or cursor
            if status["status"] != "scraping" and status["next"] is None:
                return status["status"], documents
            if not status["data"]:
                await asyncio.sleep(1)


async def the_four_calls_answer(session: ClientSession, site: TestSite) -> None:
    """Firecrawl's four core tools listed; scrape, map, crawl and its status answer."""
    listed = {tool.name for tool in (await session.list_tools()).tools}
    assert listed >= CORE_TOOLS
    text, document = await call(
        session, "firecrawl_scrape", url=site.url("/page/3"), onlyMainContent=False
    )
    assert text.startswith("# Page 3") or "Page 3" in text.split("```json")[0]
    assert "Page 3" in document["markdown"]
    assert document["metadata"]["statusCode"] == 200
    text, mapped = await call(session, "firecrawl_map", url=site.url("/"))
    assert site.url("/page/0") in text
    assert site.url("/page/0") in {link["url"] for link in mapped["links"]}
    text, started = await call(
        session, "firecrawl_crawl", url=site.url("/"), limit=5, includePaths=["^/page/"]
    )
    assert started["id"] in text
    state, documents = await crawl_to_the_end(session, started["id"])
    assert state == "completed"
    sources = {doc["metadata"]["sourceURL"] for doc in documents}
    assert len(sources) == len(documents) == 5
    assert all(source.startswith(site.url("/")) for source in sources)
    assert all(doc["markdown"] for doc in documents)


async def test_crawlstream_mcp_over_stdio(shared_topics: Topics, shared_worker, site, tmp_path):
    """`crawlstream mcp`, started by the client, on the operator's settings."""
    env = {"PATH": str(Path(sys.executable).parent)} | shared_topics.env()
    async with stdio_session(
        sys.executable, ["-m", "service", "mcp"], env, tmp_path / "mcp.log"
    ) as session:
        await the_four_calls_answer(session, site)


async def test_the_gateway_mcp_endpoint_with_a_key(keyed_gateway: GatewayProcess, site):
    """`/mcp` of the gateway, with the tenant's key."""
    async with http_session(f"{keyed_gateway.url}/mcp", KEY) as session:
        await the_four_calls_answer(session, site)


async def test_a_refused_option_is_a_tool_error_with_the_gateway_message(
    keyed_gateway: GatewayProcess, site
):
    """An option the cluster cannot honour: a tool error naming it (the v2 route's 400
    message), not a protocol failure; the session goes on."""
    async with http_session(f"{keyed_gateway.url}/mcp", KEY) as session:
        refused = await session.call_tool(
            "firecrawl_scrape", {"url": site.url("/page/1"), "proxy": "stealth"}
        )
        job = await session.call_tool("firecrawl_check_crawl_status", {"id": "no-such-job"})
        listed = await session.list_tools()
    assert refused.is_error
    assert refused.content[0].text.startswith("Bad Request: proxy")
    assert job.is_error
    assert job.content[0].text == "Job not found"
    assert listed.tools


async def test_the_gateway_mcp_endpoint_refuses_a_caller_without_a_key(
    keyed_gateway: GatewayProcess,
):
    """No key, or a wrong one: 401 in Firecrawl's shape, before any MCP message is read."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(base_url=keyed_gateway.url, timeout=30) as client:
        missing = await client.post("/mcp", json=initialize, headers=accept)
        stream = await client.get("/mcp", headers={"Accept": "text/event-stream"})
        wrong = await client.post(
            "/mcp", json=initialize, headers=accept | {"Authorization": "Bearer fc-wrong-key"}
        )
    assert [missing.status_code, wrong.status_code, stream.status_code] == [401, 401, 401]
    assert missing.json()["success"] is False


@pytest.mark.skipif(
    NODE is None or not FIRECRAWL_MCP.is_file(),
    reason="node or tests/js/node_modules/firecrawl-mcp missing (make setup runs npm ci)",
)
async def test_firecrawl_mcp_against_the_gateway(keyed_gateway: GatewayProcess, site, tmp_path):
    """Firecrawl's own MCP server (3.26) with FIRECRAWL_API_URL at the gateway and a tenant
    key: scrape, map, crawl (it waits for the end) and the crawl's status succeed."""
    assert NODE is not None
    env = {"PATH": str(Path(NODE).parent), "FIRECRAWL_API_URL": keyed_gateway.url}
    env |= {"FIRECRAWL_API_KEY": KEY}
    async with stdio_session(NODE, [str(FIRECRAWL_MCP)], env, tmp_path / "fc.log") as session:
        listed = {tool.name for tool in (await session.list_tools()).tools}
        assert listed >= CORE_TOOLS
        text, _ = await call(
            session, "firecrawl_scrape", url=site.url("/page/3"), onlyMainContent=False
        )
        assert "Page 3" in json.loads(text)["markdown"]
        text, _ = await call(session, "firecrawl_map", url=site.url("/"))
        assert site.url("/page/0") in {link["url"] for link in json.loads(text)["links"]}
        text, _ = await call(
            session, "firecrawl_crawl", url=site.url("/"), limit=5, includePaths=["^/page/"]
        )
        crawled = json.loads(text)
        assert crawled["status"] == "completed"
        assert len(crawled["data"]) == 5
        text, _ = await call(session, "firecrawl_check_crawl_status", id=crawled["id"])
        status = json.loads(text)
        assert status["status"] == "completed"
        assert {doc["metadata"]["sourceURL"] for doc in status["data"]} == {
            doc["metadata"]["sourceURL"] for doc in crawled["data"]
        }
