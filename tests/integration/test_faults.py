"""Faults: the browser dies mid-crawl, the broker goes away for 20 seconds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest
from harness import (
    Topics,
    WorkerProcess,
    chromium_pids,
    collecting,
    descendants,
    produce,
    running_broker,
)

from service.contracts import CrawlRequest, EventType, dump
from service.messaging.topics import ensure_topics

pytestmark = pytest.mark.integration

BROKER_OUTAGE_S = 60
"""How long the broker stays down: the scenario, not a wait for a condition. Longer than
CRAWL_KAFKA_TIMEOUT (30 s) and the producer's request timeout (40 s), so sends and their
acknowledgements time out and must be re-sent."""


def _requests(site, prefix: str, count: int, urls: int, ms: int) -> dict[str, list[str]]:
    return {
        f"{prefix}-{r}": [site.url(f"/slow?ms={ms}&r={prefix}{r}-{u}") for u in range(urls)]
        for r in range(count)
    }


async def _produce(topics: Topics, requests: dict[str, list[str]]) -> None:
    await produce(
        topics,
        [
            (rid.encode(), dump(CrawlRequest(request_id=rid, urls=urls)))
            for rid, urls in requests.items()
        ],
    )


def _browser_main_pids(worker_pid: int) -> set[int]:
    found = set()
    for pid in descendants(worker_pid) & chromium_pids():
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"--type=" not in cmdline:
            found.add(pid)
    return found


def _all_ok(collector, requests: dict[str, list[str]]) -> None:
    for rid, urls in requests.items():
        completed = [e for e in collector.seen.terminal(rid) if e.type == EventType.COMPLETED]
        assert completed, rid
        run = completed[-1].run_id
        results = {r.url: r for r in collector.seen.results_of(rid) if r.run_id == run}
        assert sorted(results) == sorted(urls), rid
        assert all(r.ok for r in results.values()), [r.error for r in results.values()]


async def test_browser_killed_mid_crawl_is_replaced_and_pages_retried(
    topics, collector, site, start_worker
):
    """Kill -9 the Chromium browser process while pages load: the worker starts a new
    browser, retries the affected pages, and every request completes with every page ok."""
    worker = await start_worker()
    requests = _requests(site, "crash", count=6, urls=4, ms=800)
    await _produce(topics, requests)
    await collector.wait_until(
        lambda seen: any(e.type == EventType.PAGE_SUCCEEDED for e, _ in seen.events),
        deadline_s=120,
    )
    [browser] = _browser_main_pids(worker.process.pid)
    os.kill(browser, signal.SIGKILL)
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in requests), deadline_s=240
    )
    _all_ok(collector, requests)
    assert "browser.died" in [entry["event"] for entry in worker.events()]
    assert browser not in _browser_main_pids(worker.process.pid)


OUTAGE_LOG_LINES = 120
"""At most two log lines a second while the broker is down (aiokafka's clients logged each
retry: about 12,000 lines in the minute; 26 since repeats are counted)."""


@pytest.mark.long_running
async def test_broker_down_for_a_minute_loses_nothing_and_renders_nothing_twice(site, tmp_path):
    """Stop the broker for 60 s mid-run and start it again: the worker reconnects, every
    request completes with all its results, and no page is rendered twice (what was rendered
    is re-sent, not crawled again); meanwhile its log grows by a few lines, not thousands."""
    async with running_broker(data_dir=tmp_path / "kafka") as broker:
        topics = Topics(
            bootstrap=broker.bootstrap_servers,
            extra_env={"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site.port}"},
        )
        await ensure_topics(topics.settings())
        worker = WorkerProcess(topics.env(), tmp_path / "outage.log", "outage")
        requests = {
            f"outage-{r}": [site.url(f"/slow/outage-{r}-{u}?ms=1500") for u in range(3)]
            for r in range(8)
        }
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(worker.close)
            await worker.start()
            collector = await stack.enter_async_context(collecting(topics))
            await _produce(topics, requests)
            await collector.wait_until(lambda seen: len(seen.events) > 0, deadline_s=120)
            await broker.kill()
            logged = len(worker.log_path.read_text(errors="replace").splitlines())
            await asyncio.sleep(BROKER_OUTAGE_S)
            outage_lines = len(worker.log_path.read_text(errors="replace").splitlines()) - logged
            await broker.restart()
            await collector.wait_until(
                lambda seen: all(seen.terminal(rid) for rid in requests), deadline_s=300
            )
            _all_ok(collector, requests)
            rendered = {url: site.hits[url.split("?")[0].removeprefix(site.base_url)]
                        for urls in requests.values() for url in urls}  # fmt: skip
            assert set(rendered.values()) == {1}, rendered
            assert outage_lines < OUTAGE_LOG_LINES, outage_lines
            assert worker.process.returncode is None
            assert await worker.terminate() == 0
