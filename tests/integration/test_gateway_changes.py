"""Firecrawl's `changeTracking` format through the official `firecrawl-py` SDK, against the
gateway, a real broker, worker and Chromium: a page scraped twice is `new`, then `changed`
with its git diff after an edit, then `same`; a crawl under the same tag sees the same
history; the `json` mode is refused with a 400 that names it."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

import httpx
import pytest
from _changepages import version_words
from firecrawl import Firecrawl
from firecrawl.v2.types import ChangeTrackingFormat
from firecrawl.v2.utils.error_handler import FirecrawlError

if TYPE_CHECKING:
    from gateway import GatewayProcess
    from testsite import TestSite

pytestmark = pytest.mark.integration

SDK_TIMEOUT_S = 120
"""The SDK's own waits (scrape, crawl waiter)."""


def sdk(gateway: GatewayProcess) -> Firecrawl:
    return Firecrawl(api_key="fc-test", api_url=gateway.url)


async def test_scrapes_and_a_crawl_under_one_tag_report_new_changed_and_same(
    start_worker, start_gateway, site: TestSite
):
    """`scrape` with `changeTracking` (`git-diff`, a tag): first `new` without a previous
    scrape, after an edit `changed` with the old and new lines in `diff.text`, then `same`
    (the page's clock and nonces changed meanwhile); a `crawl` under the same tag finds
    the page `same`; another tag starts at `new`."""
    await start_worker()
    gateway = await start_gateway()
    name = f"gw-{uuid.uuid4().hex[:8]}"
    url = site.url(f"/changes/p/{name}")

    async def scrape(tag: str) -> dict[str, object]:
        tracking = ChangeTrackingFormat(modes=["git-diff"], tag=tag)
        doc = await asyncio.to_thread(
            sdk(gateway).scrape, url, formats=["markdown", tracking], timeout=60_000
        )
        assert doc.change_tracking is not None
        return doc.change_tracking

    first = await scrape("prices")
    assert first["changeStatus"] == "new"
    assert first["previousScrapeAt"] is None
    assert first["visibility"] == "visible"
    async with httpx.AsyncClient() as client:
        edited = await client.post(site.url(f"/changes/edit/{name}"))
        assert edited.status_code == 200
    second = await scrape("prices")
    assert second["changeStatus"] == "changed"
    assert second["previousScrapeAt"] is not None
    lines = second["diff"]["text"].splitlines()
    assert f"-{version_words(name, 0)}" in lines
    assert f"+{version_words(name, 1)}" in lines
    third = await scrape("prices")
    assert third["changeStatus"] == "same"
    assert "diff" not in third
    other = await scrape("another-tag")
    assert other["changeStatus"] == "new"

    crawl = await asyncio.to_thread(
        sdk(gateway).crawl,
        url,
        limit=1,
        scrape_options={"formats": ["markdown", ChangeTrackingFormat(modes=[], tag="prices")]},
        poll_interval=1,
        timeout=SDK_TIMEOUT_S,
    )
    assert crawl.status == "completed"
    [doc] = crawl.data
    assert doc.change_tracking is not None
    assert doc.change_tracking["changeStatus"] == "same"


async def test_the_json_mode_is_refused_naming_it(start_gateway, site: TestSite):
    """`modes: ["json"]` gets Firecrawl's 400 naming `modes` and `json`; nothing runs."""
    gateway = await start_gateway()
    tracking = ChangeTrackingFormat(modes=["json"], schema={"type": "object"})
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(
            sdk(gateway).scrape, site.url("/changes/p/refused"), formats=["markdown", tracking]
        )
    assert raised.value.status_code == 400
    assert "modes" in str(raised.value)
    assert "json mode" in str(raised.value)
