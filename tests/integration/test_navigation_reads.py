"""A settled read in real Chromium never returns a document that is still being parsed."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from aiohttp import web
from playwright.async_api import async_playwright

from service.browser.deadline import StepDeadline
from service.browser.launch import CHROMIUM_ARGS, system_chromium
from service.browser.navigation import PROBE_SCRIPT, NavigationWatch
from service.browser.settle import QUIET_S

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.integration

HELD_S = 1.5
"""How long the server holds the end of the document back."""

SETTLE_S = 3.0
"""The default `CRAWL_RENDER_SETTLE`."""


async def _slow_document(request: web.Request) -> web.StreamResponse:
    """The head and a first paragraph at once; the last paragraph `HELD_S` later."""
    response = web.StreamResponse(headers={"Content-Type": "text/html"})
    await response.prepare(request)
    await response.write(b"<!DOCTYPE html><html><head><title>Slow</title></head><body>")
    await response.write(b"<p>First part</p>" + b" " * 4096)
    await asyncio.sleep(HELD_S)
    await response.write(b"<p>Final content</p></body></html>")
    await response.write_eof()
    return response


@pytest.fixture
async def slow_site() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/slow", _slow_document)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/slow"
    finally:
        await runner.cleanup()


async def test_a_settled_read_waits_for_the_document_to_be_parsed(slow_site: str) -> None:
    """A read asked for while the document is still arriving (as when Playwright reports the
    previous document's `load` just after a script's navigation committed) waits for the
    whole document instead of reading its first part."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=system_chromium(), args=list(CHROMIUM_ARGS)
        )
        try:
            context = await browser.new_context()
            await context.add_init_script(PROBE_SCRIPT)
            page = await context.new_page()
            async with NavigationWatch(page) as watch:
                await page.goto(slow_site, wait_until="commit", timeout=30_000)
                await page.wait_for_selector("text=First part", timeout=30_000)
                deadline = StepDeadline(30.0)
                _, html = await watch.settled_read(QUIET_S, SETTLE_S, deadline)
            assert "First part" in html
            assert "Final content" in html
        finally:
            await browser.close()
