"""Firecrawl's monitor API through the official `firecrawl-py` SDK as written, against the
gateway, a real broker, a worker, Chromium and the webhook dispatcher: a monitor is created,
listed, read, run by hand (a first check finds every page `new`, the next the one changed
page with its diff), its check's pages read by status and paged with `next`, paused,
deleted; its receiver gets a signed `monitor.page` per page and a
`monitor.check.completed` per check."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING

import httpx
import pytest
from _changepages import version_words
from firecrawl import Firecrawl
from firecrawl.v2.types import PaginationConfig
from firecrawl.v2.utils.error_handler import FirecrawlError
from gateway import DispatcherProcess
from waiting import until
from webhook_receiver import receiving

from service.webhooks import verify

if TYPE_CHECKING:
    from firecrawl.v2.types import MonitorCheckDetail
    from gateway import GatewayProcess
    from harness import Topics
    from testsite import TestSite
    from webhook_receiver import Receiver

pytestmark = pytest.mark.integration

CHECK_DEADLINE_S = 120

SECRET = "whsec-monitor-test"  # noqa: S105 - a test key for a local receiver


def sdk(gateway: GatewayProcess) -> Firecrawl:
    return Firecrawl(api_key="fc-test", api_url=gateway.url)


async def finished(app: Firecrawl, monitor_id: str, check_id: str) -> MonitorCheckDetail:
    """The check once it ended (polled through the SDK, as a user would)."""
    async with asyncio.timeout(CHECK_DEADLINE_S):
        while True:
            check = await asyncio.to_thread(app.get_monitor_check, monitor_id, check_id)
            if check.status in {"completed", "failed", "partial"}:
                return check
            await asyncio.sleep(0.5)


async def test_a_monitor_is_created_run_read_paused_and_deleted(
    topics: Topics, start_worker, start_gateway, site: TestSite, tmp_path
):
    """The first check by hand finds both pages `new`; after one page is edited, the next
    finds it `changed` with the old and new lines in its diff and the other `same`; the
    check's pages filtered by status, and paged one at a time with `next`; the receiver
    gets `monitor.page` and `monitor.check.completed` of both checks, signed; pausing shows
    `paused` and no next run; a deleted monitor is a 404."""
    async with receiving() as receiver:
        allowed = f"127.0.0.1:{site.port},{receiver.target}"
        await start_worker(CRAWL_ALLOWED_HOSTS=allowed)
        gateway = await start_gateway(CRAWL_ALLOWED_HOSTS=allowed)
        env = topics.env(CRAWL_ALLOWED_HOSTS=allowed, CRAWL_WEBHOOK_SECRET=SECRET)
        dispatcher = DispatcherProcess(env, tmp_path / "d.log", "d")
        await dispatcher.start()
        try:
            await monitor_lifecycle(sdk(gateway), site, receiver)
        finally:
            await dispatcher.close()


async def monitor_lifecycle(app: Firecrawl, site: TestSite, receiver: Receiver) -> None:
    name = f"mon-{uuid.uuid4().hex[:8]}"
    urls = [site.url(f"/changes/p/{name}-a"), site.url(f"/changes/p/{name}-b")]
    monitor = await asyncio.to_thread(
        app.create_monitor,
        name,
        {"cron": "0 0 1 1 *", "timezone": "Europe/Berlin"},  # yearly: only manual checks here
        [  # two targets: one `monitor.check.completed` per check, with the check's summary
            {"type": "scrape", "urls": [url], "scrapeOptions": {"formats": ["markdown"]}}
            for url in urls
        ],
        webhook={"url": receiver.url(), "metadata": {"team": "pricing"}},
    )
    assert monitor.status == "active"
    assert monitor.schedule.cron == "0 0 1 1 *"
    assert monitor.next_run_at is not None
    listed = await asyncio.to_thread(app.list_monitors)
    assert monitor.id in {m.id for m in listed}
    read = await asyncio.to_thread(app.get_monitor, monitor.id)
    assert (read.name, read.retention_days) == (name, 30)

    first = await asyncio.to_thread(app.run_monitor, monitor.id)
    assert first.trigger == "manual"
    done = await finished(app, monitor.id, first.id)
    assert done.status == "completed"
    assert done.summary.new == 2
    assert done.summary.total_pages == 2
    assert {page.status for page in done.pages} == {"new"}

    async with httpx.AsyncClient() as client:
        edited = await client.post(site.url(f"/changes/edit/{name}-a"))
        assert edited.status_code == 200
    second = await asyncio.to_thread(app.run_monitor, monitor.id)
    done = await finished(app, monitor.id, second.id)
    assert (done.summary.changed, done.summary.same, done.summary.new) == (1, 1, 0)
    changed = await asyncio.to_thread(
        app.get_monitor_check, monitor.id, second.id, status="changed"
    )
    [page] = changed.pages
    assert page.url == urls[0]
    assert page.diff is not None
    assert page.diff.text is not None
    lines = page.diff.text.splitlines()
    assert f"-{version_words(f'{name}-a', 0)}" in lines
    assert f"+{version_words(f'{name}-a', 1)}" in lines
    one_by_one = await asyncio.to_thread(app.get_monitor_check, monitor.id, second.id, limit=1)
    assert sorted(p.url for p in one_by_one.pages) == sorted(urls)  # the SDK followed `next`
    first_only = await asyncio.to_thread(
        app.get_monitor_check,
        monitor.id,
        second.id,
        limit=1,
        pagination_config=PaginationConfig(auto_paginate=False),
    )
    assert len(first_only.pages) == 1
    assert first_only.next is not None
    checks = await asyncio.to_thread(app.list_monitor_checks, monitor.id)
    assert [c.id for c in checks] == [second.id, first.id]
    read = await asyncio.to_thread(app.get_monitor, monitor.id)
    assert read.last_check_summary is not None
    assert read.last_check_summary.changed == 1

    await pause_and_delete(app, monitor.id)
    await webhooks_of_both_checks(receiver, [first.id, second.id], urls)


async def webhooks_of_both_checks(receiver: Receiver, checks: list[str], urls: list[str]) -> None:
    """Per check, a signed `monitor.page` per page (its status) and a `monitor.check.completed`
    with the summary, the monitor's metadata echoed."""

    def of(check: str, kind: str) -> list[dict]:
        found = {d.body["eventId"]: d.body for d in receiver.of(check) if d.type == kind}
        return list(found.values())

    await until(lambda: all(of(c, "monitor.check.completed") for c in checks), 60, every_s=0.2)
    completions = [d for d in receiver.deliveries if d.type == "monitor.check.completed"]
    assert sorted(d.body["id"] for d in completions) == sorted(checks)  # one per check
    assert all(
        verify(SECRET, d.raw, d.headers["X-Firecrawl-Signature"]) for d in receiver.deliveries
    )
    first, second = checks
    assert sorted(
        (p["data"][0]["url"], p["data"][0]["status"]) for p in of(first, "monitor.page")
    ) == [(urls[0], "new"), (urls[1], "new")]
    assert sorted(
        (p["data"][0]["url"], p["data"][0]["status"]) for p in of(second, "monitor.page")
    ) == [(urls[0], "changed"), (urls[1], "same")]
    [first_done] = of(first, "monitor.check.completed")
    assert first_done["data"][0]["summary"]["new"] == 2
    [done] = of(second, "monitor.check.completed")
    assert done["data"][0]["status"] == "completed"
    assert done["data"][0]["checkId"] == second
    assert done["data"][0]["summary"] == {
        "totalPages": 2,
        "same": 1,
        "changed": 1,
        "new": 0,
        "removed": 0,
        "error": 0,
    }
    assert done["metadata"] == {"team": "pricing"}


async def pause_and_delete(app: Firecrawl, monitor_id: str) -> None:
    paused = await asyncio.to_thread(app.update_monitor, monitor_id, status="paused")
    assert paused.status == "paused"
    assert paused.next_run_at is None
    assert await asyncio.to_thread(app.delete_monitor, monitor_id)
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(app.get_monitor, monitor_id)
    assert raised.value.status_code == 404


async def test_a_tenant_sees_only_its_monitors_and_fast_schedules_are_refused(
    start_gateway, site: TestSite, tmp_path
):
    """Two tenants' keys: each lists and reads only its own monitors (another's is a 404,
    also to update, run or delete). With the default CRAWL_MONITOR_MIN_INTERVAL (60 s),
    `every 5 seconds` is a 400 that names the setting; `search` targets are refused by
    name."""
    keys = tmp_path / "keys.json"
    entries = [{"key": f"fc-{name}-test-key", "tenant": name} for name in ("acme", "globex")]
    keys.write_text(json.dumps({"keys": entries}))
    gateway = await start_gateway(CRAWL_GATEWAY_KEYS_FILE=str(keys))
    acme = Firecrawl(api_key="fc-acme-test-key", api_url=gateway.url)
    globex = Firecrawl(api_key="fc-globex-test-key", api_url=gateway.url)
    target = [{"type": "scrape", "urls": [site.url("/page/1")]}]
    mine = await asyncio.to_thread(acme.create_monitor, "acme's", {"text": "hourly"}, target)
    assert mine.schedule.cron == "0 * * * *"
    theirs = await asyncio.to_thread(globex.create_monitor, "globex's", {"text": "daily"}, target)
    assert [m.id for m in await asyncio.to_thread(acme.list_monitors)] == [mine.id]
    assert [m.id for m in await asyncio.to_thread(globex.list_monitors)] == [theirs.id]
    for call in (acme.get_monitor, acme.run_monitor, acme.delete_monitor):
        with pytest.raises(FirecrawlError) as raised:
            await asyncio.to_thread(call, theirs.id)
        assert raised.value.status_code == 404
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(acme.update_monitor, theirs.id, status="paused")
    assert raised.value.status_code == 404

    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(acme.create_monitor, "fast", {"text": "every 5 seconds"}, target)
    assert raised.value.status_code == 400
    assert "CRAWL_MONITOR_MIN_INTERVAL" in str(raised.value)
    with pytest.raises(FirecrawlError) as raised:
        await asyncio.to_thread(
            acme.create_monitor,
            "search",
            {"text": "hourly"},
            [{"type": "search", "queries": ["x"]}],
        )
    assert raised.value.status_code == 400
    assert "search" in str(raised.value)
