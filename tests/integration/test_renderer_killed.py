"""A renderer killed under a navigation (as the kernel's OOM killer does) is a browser crash."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from pathlib import Path

import pytest
from harness import descendants

from service.browser.pool import BrowserPool
from service.browser.render import render_page
from service.contracts import CrawlOptions, ErrorCode
from service.settings import Settings

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0
TRIES = 3
"""Navigations killed in one test: each one is a separate chance for a mislabel."""

ANSWER_DELAY_MS = 3_000
"""The test site answers this late, so the renderer is killed while the navigation waits for
its answer (the test waits for the request to arrive, not for time to pass)."""


def _renderers() -> list[int]:
    """This process's Chromium renderers (their command lines are rewritten: one string)."""
    found = []
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            if b"--type=renderer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return found


async def _arrived(site, path: str) -> None:
    async with asyncio.timeout(DEADLINE_S):
        while site.hits[path] == 0:
            await asyncio.sleep(0.02)


async def test_a_navigation_whose_renderer_is_killed_is_a_browser_crash_not_a_download(site):
    """Issue 19: renderers the OOM killer took were reported as `download` (the navigation
    is aborted with an answer, as a download's is). Each page's renderer is SIGKILLed while
    its navigation waits for the answer: every result is `browser_crash`."""
    settings = Settings(allowed_hosts=[f"127.0.0.1:{site.port}"])
    codes = [await _killed_navigation(settings, site) for _ in range(TRIES)]
    assert [code for code, _ in codes] == [ErrorCode.BROWSER_CRASH] * TRIES, codes


async def _killed_navigation(settings: Settings, site) -> tuple[ErrorCode, str]:
    """A page of a fresh browser loads a page, then its renderer dies under the next one.

    A browser of its own each time: the kill takes every renderer, spare contexts' too."""
    options = CrawlOptions()
    async with BrowserPool(settings) as pool:
        context = await pool.open_context(options)
        first = await render_page(context, site.url("/page/1"), options, **_LIMITS)
        assert first.ok, first.error
        path = f"/slow/{uuid.uuid4().hex}"
        fetch = render_page(context, site.url(f"{path}?ms={ANSWER_DELAY_MS}"), options, **_LIMITS)
        task = asyncio.ensure_future(fetch)
        await _arrived(site, path)
        for pid in _renderers():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        result = await asyncio.wait_for(task, DEADLINE_S)
        await context.shut()
    assert result.error is not None
    return result.error.code, result.error.message


_LIMITS = {"timeout_s": 30.0, "max_result_bytes": 10_000_000}


async def test_a_download_on_a_live_page_stays_a_download(site):
    """The same abort with an answer, on a page whose renderer lives, is still `download`."""
    settings = Settings(allowed_hosts=[f"127.0.0.1:{site.port}"])
    options = CrawlOptions()
    async with BrowserPool(settings) as pool:
        context = await pool.open_context(options)
        result = await render_page(context, site.url("/hostile/download"), options, **_LIMITS)
        await context.shut()
    assert result.error is not None
    assert result.error.code == ErrorCode.DOWNLOAD, result.error
