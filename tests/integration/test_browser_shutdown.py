"""A worker stopped by a signal to its whole process group (a terminal's Ctrl-C, a
container runtime stopping every process) while a browser is being recycled: Playwright's
driver dies with it, and nothing is left for asyncio to report as a future whose exception
was never retrieved."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from harness import produce

from service.contracts import CrawlRequest, dump

pytestmark = pytest.mark.integration

RECYCLE_DEADLINE_S = 120.0
EXIT_DEADLINE_S = 60.0


async def test_a_group_signal_during_a_recycle_leaves_no_unretrieved_driver_error(
    topics, site, start_worker
):
    """Recycling after every page, the worker renders its second page on a fresh browser
    while the first drains; SIGTERM to the process group: the worker exits, and its log
    has no `Future exception was never retrieved` (the driver's loss is logged)."""
    worker = await start_worker(CRAWL_BROWSER_RECYCLE_PAGES="1")
    urls = [site.url("/page/1"), site.url("/slow/recycle?ms=600000")]
    request = CrawlRequest(request_id="recycle", urls=urls)
    await produce(topics, [(b"recycle", dump(request))])
    await worker.wait_for_log("browser.recycling", RECYCLE_DEADLINE_S)
    async with asyncio.timeout(RECYCLE_DEADLINE_S):
        while site.hits["/slow/recycle"] == 0:
            await asyncio.sleep(0.1)
    assert worker.process is not None
    os.killpg(worker.process.pid, signal.SIGTERM)
    await asyncio.wait_for(worker.process.wait(), EXIT_DEADLINE_S)

    text = worker.log_path.read_text(errors="replace")
    assert "never retrieved" not in text, text[-3000:]
