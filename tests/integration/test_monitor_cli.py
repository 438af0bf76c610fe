"""`crawlstream monitor` against a real broker (no worker: the commands write and read the
monitors and requests topics): create, list, pause, resume, run by hand, checks, delete."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness import Topics
    from testsite import TestSite

pytestmark = pytest.mark.integration

CLI_DEADLINE_S = 60


async def crawlstream(topics: Topics, *args: str, code: int = 0) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        "monitor",
        *args,
        env=os.environ | topics.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CLI_DEADLINE_S)
    assert process.returncode == code, err.decode()
    return (out if code == 0 else err).decode()


async def test_a_monitor_is_created_paused_resumed_run_and_deleted(topics: Topics, site: TestSite):
    """Each command does what it says on the topics; a schedule faster than the minimum
    (60 s by default) is refused with exit code 2 and the setting's name."""
    monitor_id = (
        await crawlstream(topics, "create", "prices", site.url("/page/1"), "--every", "hourly")
    ).strip()
    [line] = (await crawlstream(topics, "list")).splitlines()
    assert line.startswith(f"{monitor_id}  active")
    assert "0 * * * *" not in line  # shown as given
    await crawlstream(topics, "pause", monitor_id)
    [listed] = [json.loads(x) for x in (await crawlstream(topics, "list", "--json")).splitlines()]
    assert listed["status"] == "paused"
    await crawlstream(topics, "resume", monitor_id)
    check = (await crawlstream(topics, "run", monitor_id)).strip()
    [row] = (await crawlstream(topics, "checks", monitor_id)).splitlines()
    assert row.startswith(f"{check}  manual")
    assert f"{check}.0" in row
    await crawlstream(topics, "delete", monitor_id)
    assert await crawlstream(topics, "list") == ""
    refused = await crawlstream(
        topics, "create", "fast", site.url("/page/1"), "--every", "every 5 seconds", code=2
    )
    assert "CRAWL_MONITOR_MIN_INTERVAL" in refused
