"""Every malformed call is Firecrawl's 400, never a 5xx: a table of bodies a careless or
hostile caller sends (broken URLs, wrong types, out-of-range numbers) against a gateway
replica on a real broker. No worker runs: a body wrongly accepted would be produced (a
crawl answers 200, a scrape waits and times out), and the test fails either way."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from gateway import GatewayProcess

pytestmark = pytest.mark.integration

ANSWER_TIMEOUT_S = 15
"""A 400 is decided before anything is produced: far below this."""

U = "https://example.com/"
LONG = "https://example.com/" + "a" * 70_000
WAIT_AS_STRING = {"type": "wait", "milliseconds": "5"}

MALFORMED: list[tuple[str, dict[str, Any]]] = [
    ("/v2/scrape", {}),
    ("/v2/scrape", {"url": None}),
    ("/v2/scrape", {"url": 42}),
    ("/v2/scrape", {"url": ["https://example.com/"]}),
    ("/v2/scrape", {"url": "http://[::1"}),
    ("/v2/scrape", {"url": "http://[fe80::1%25eth0"}),
    ("/v2/scrape", {"url": "http://[::1]:99999/"}),
    ("/v2/scrape", {"url": "http://example.com:abc/"}),
    ("/v2/scrape", {"url": LONG}),
    ("/v2/scrape", {"url": "ftp://example.com/"}),
    ("/v2/scrape", {"url": "https://"}),
    ("/v2/scrape", {"url": "https://exa mple.com/"}),
    ("/v2/scrape", {"url": "https://example.com/\x00"}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "wait", "milliseconds": "5"}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "wait", "milliseconds": 5.5}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "wait", "milliseconds": True}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "wait", "milliseconds": -1}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "wait", "milliseconds": 10**30}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "click", "selector": 5}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "click", "all": "yes", "selector": "a"}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "scroll", "direction": "left"}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "scroll", "amount": "10"}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "press", "key": ""}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "write"}]}),
    ("/v2/scrape", {"url": U, "actions": "wait"}),
    ("/v2/scrape", {"url": U, "actions": [[]]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": 5}]}),
    ("/v2/scrape", {"url": U, "actions": [{"type": "screenshot", "fullPage": "yes"}]}),
    ("/v2/scrape", {"url": U, "timeout": "60000"}),
    ("/v2/scrape", {"url": U, "timeout": 10**30}),
    ("/v2/scrape", {"url": U, "timeout": 1.5e3}),
    ("/v2/scrape", {"url": U, "formats": "markdown"}),
    ("/v2/scrape", {"url": U, "formats": [5]}),
    ("/v2/scrape", {"url": U, "formats": [{"type": 5}]}),
    ("/v2/scrape", {"url": U, "formats": [{"type": "screenshot", "fullPage": "x"}]}),
    ("/v2/scrape", {"url": U, "headers": {"X": 5}}),
    ("/v2/scrape", {"url": U, "headers": ["X"]}),
    ("/v2/scrape", {"url": U, "headers": {"X\nY": "1"}}),
    ("/v2/scrape", {"url": U, "headers": {"X": "a\r\nb"}}),
    ("/v2/scrape", {"url": U, "includeTags": "main"}),
    ("/v2/scrape", {"url": U, "includeTags": [5]}),
    ("/v2/scrape", {"url": U, "onlyMainContent": "yes"}),
    ("/v2/scrape", {"url": U, "mobile": 1}),
    ("/v2/scrape", {"url": U, "location": "DE"}),
    ("/v2/scrape", {"url": U, "location": {"country": 5}}),
    ("/v2/scrape", {"url": U, "location": {"languages": "de"}}),
    ("/v2/scrape", {"url": U, "location": {"languages": ["\x00"]}}),
    ("/v2/scrape", {"url": U, "proxy": 5}),
    ("/v2/scrape", {"url": U, "proxy": "http://[::1"}),
    ("/v2/scrape", {"url": U, "proxy": "socks5://user:pw@:0"}),
    ("/v2/scrape", {"url": U, "parsers": "pdf"}),
    ("/v2/scrape", {"url": U, "parsers": [5]}),
    ("/v2/scrape", {"url": U, "maxAge": "x"}),
    ("/v2/scrape", {"url": U, "skipTlsVerification": "yes"}),
    ("/v2/scrape", {"url": U, "removeBase64Images": "no"}),
    ("/v2/scrape", {"url": U, "blockAds": "x"}),
    ("/v2/crawl", {"url": U, "limit": "10"}),
    ("/v2/crawl", {"url": U, "limit": 10**30}),
    ("/v2/crawl", {"url": U, "limit": -1}),
    ("/v2/crawl", {"url": U, "maxDiscoveryDepth": "2"}),
    ("/v2/crawl", {"url": U, "includePaths": "^/a"}),
    ("/v2/crawl", {"url": U, "includePaths": ["("]}),
    ("/v2/crawl", {"url": U, "excludePaths": [5]}),
    ("/v2/crawl", {"url": U, "delay": "1"}),
    ("/v2/crawl", {"url": U, "sitemap": 5}),
    ("/v2/crawl", {"url": U, "sitemap": ["include"]}),
    ("/v2/crawl", {"url": U, "scrapeOptions": "x"}),
    (
        "/v2/crawl",
        {"url": U, "scrapeOptions": {"actions": [{"type": "wait", "milliseconds": "5"}]}},
    ),
    ("/v2/crawl", {"url": U, "webhook": 5}),
    ("/v2/crawl", {"url": U, "webhook": {"url": 5}}),
    ("/v2/crawl", {"url": U, "webhook": {"url": "http://[::1"}}),
    ("/v2/crawl", {"url": U, "webhook": {"url": "https://example.com/h", "headers": "x"}}),
    ("/v2/crawl", {"url": U, "webhook": {"url": "https://example.com/h", "events": "completed"}}),
    ("/v2/crawl", {"url": U, "maxConcurrency": "9"}),
    ("/v2/crawl", {"url": U, "allowSubdomains": "yes"}),
    ("/v2/crawl", {"url": "http://[::1"}),
    ("/v2/batch/scrape", {"urls": "https://example.com/"}),
    ("/v2/batch/scrape", {"urls": []}),
    ("/v2/batch/scrape", {"urls": [5]}),
    ("/v2/batch/scrape", {"urls": ["http://[::1"]}),
    ("/v2/batch/scrape", {"urls": ["http://[::1", U], "ignoreInvalidURLs": "no"}),
    ("/v2/batch/scrape", {"urls": [U], "actions": [{"type": "wait", "milliseconds": "5"}]}),
    ("/v2/batch/scrape", {"urls": [LONG]}),
    ("/v2/batch/scrape", {"urls": [U], "maxConcurrency": 1.5}),
    ("/v2/map", {}),
    ("/v2/map", {"url": "http://[::1"}),
    ("/v2/map", {"url": U, "limit": "5"}),
    ("/v2/map", {"url": U, "limit": 10**30}),
    ("/v2/map", {"url": U, "search": 5}),
    ("/v2/map", {"url": U, "sitemap": 5}),
    ("/v2/map", {"url": U, "timeout": "x"}),
    ("/v2/map", {"url": U, "includeSubdomains": "x"}),
    ("/v2/map", {"url": LONG}),
]


async def test_every_malformed_body_is_a_400_in_firecrawls_shape(start_gateway):
    """Each body of the table gets 400 with `success: false` and an error naming a field."""
    gateway: GatewayProcess = await start_gateway()
    wrong: list[str] = []
    async with httpx.AsyncClient(base_url=gateway.url, timeout=ANSWER_TIMEOUT_S) as client:
        for path, body in MALFORMED:
            answer = await client.post(path, json=body)
            shaped = answer.headers.get("content-type", "").startswith("application/json")
            if answer.status_code != 400 or not shaped or answer.json().get("success") is not False:
                wrong.append(f"{path} {str(body)[:80]} -> {answer.status_code} {answer.text[:120]}")
        broken = await client.post("/v2/scrape", content=b"{not json", headers=_json())
        listed = await client.post("/v2/scrape", content=b"[1, 2]", headers=_json())
        deep = await client.post("/v2/scrape", content=b"[" * 100_000, headers=_json())
    assert len(MALFORMED) >= 50
    assert wrong == []
    assert [broken.status_code, listed.status_code, deep.status_code] == [400, 400, 400]


def _json() -> dict[str, str]:
    return {"Content-Type": "application/json"}
