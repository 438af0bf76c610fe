"""Job control end to end: cancel, status and follow, on the real broker and real Chromium
(the request deadline and the cancel bookkeeping on in-memory fakes are unit tests of the
run: tests/unit/worker/test_run.py). The "within N s" of the issue are wait deadlines
measured from the cancel, not timing assertions on anything else."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter

import aiohttp
import pytest
from harness import Collected, produce
from ports import unused_port

from service.client import CrawlClient
from service.contracts import CrawlOptions, CrawlRequest, ErrorCode, EventType, dump

pytestmark = pytest.mark.integration

SLOW_MS = 2000
"""Each page of the slow requests answers after this long."""


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


def _slow_urls(site, prefix: str, count: int, ms: int = SLOW_MS) -> list[str]:
    return [site.url(f"/slow/{prefix}-{i}?ms={ms}") for i in range(count)]


def _hits(site, urls: list[str]) -> int:
    return sum(site.hits[url.split("?")[0].removeprefix(site.base_url)] for url in urls)


def _free_port() -> int:
    return unused_port()


@pytest.fixture(scope="module")
def metrics_port() -> int:
    """The metrics port of the worker that the cancel tests which neither restart nor kill
    theirs share (`shared_worker_with`); each tells its request apart by id."""
    return _free_port()


async def _metric(port: int, name: str) -> float | None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"http://127.0.0.1:{port}/metrics", timeout=aiohttp.ClientTimeout(total=5)
        ) as response,
    ):
        text = await response.text()
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.rsplit(" ", 1)[1])
    return None


async def _cancel(topics, request_id: str, reason: str | None = None) -> float:
    """Produce a cancel; returns the loop time when the broker acknowledged it."""
    async with CrawlClient(topics.settings()) as client:
        await client.cancel(request_id, reason)
    return asyncio.get_running_loop().time()


async def _wait_terminal_within(collector, request_id: str, deadline_s: float) -> None:
    await collector.wait_until(lambda seen: seen.terminal(request_id), deadline_s=deadline_s)


def _assert_exact(collector, request_id: str, urls: list[str], kind: EventType) -> list:
    """One terminal of `kind`; every URL has exactly one result in that run; the counts are
    those of the results; nothing of the run comes after its terminal event."""
    [terminal] = collector.seen.terminal(request_id)
    assert terminal.type == kind, terminal
    results = [r for r in collector.seen.results_of(request_id) if r.run_id == terminal.run_id]
    assert Counter(r.url for r in results) == Counter(urls)
    codes = Counter(r.error.code for r in results if r.error is not None)
    assert terminal.succeeded == sum(r.ok for r in results)
    assert terminal.cancelled == codes[ErrorCode.CANCELLED]
    assert terminal.failed == len(results) - terminal.succeeded - terminal.cancelled
    run = [e for e in collector.seen.events_of(request_id) if e.run_id == terminal.run_id]
    assert run[-1] is terminal
    assert [e.seq for e in run] == list(range(len(run)))
    return results


async def test_cancel_while_partitions_are_paused_for_memory(topics, collector, site, start_worker):
    """With the governor's pause ratio set below any real use (CRAWL_MEMORY_PAUSE_RATIO=0.001,
    so the worker pauses its request partitions as soon as it holds work, and renders one page
    at a time), a cancel still stops the running request within 3 s."""
    worker = await start_worker(
        "paused",
        CRAWL_MEMORY_PAUSE_RATIO="0.001",
        CRAWL_MEMORY_RESUME_RATIO="0.0005",
        CRAWL_MEMORY_CRITICAL_RATIO="0.99",
    )
    urls = _slow_urls(site, "paused", 30)
    await produce(topics, [_request("paused", urls)])
    await collector.wait_until(lambda seen: len(seen.results_of("paused")) >= 1, deadline_s=180)
    await worker.wait_for_log("consumer.paused", 60)

    await _cancel(topics, "paused")
    before = [entry["event"] for entry in worker.events()]
    await _wait_terminal_within(collector, "paused", 3.0)
    _assert_exact(collector, "paused", urls, EventType.CANCELLED)
    assert "consumer.resumed" not in before[before.index("consumer.paused") :]


STATIC = {"CRAWL_STATIC_MEMBERSHIP": "true", "CRAWL_WORKER_NAME": "redo"}
"""The second worker joins as the killed one's static member (`group.instance.id`), so it
gets the partitions at once instead of after the dead member's 30 s session timeout: what
is tested is the redelivered record, not how the group finds out about the death."""


async def test_a_cancelled_request_redelivered_after_a_kill_is_not_crawled_again(
    topics, collector, site, start_worker
):
    """The worker is SIGKILLed right after it acted on a cancel, before the record could be
    committed; the redelivery on a second worker renders nothing and ends `cancelled`, with a
    `cancelled` result for every URL."""
    first = await start_worker("first", **STATIC)
    urls = _slow_urls(site, "redo", 10, ms=3000)
    await produce(topics, [_request("redo", urls)])
    await collector.wait_until(lambda seen: seen.events_of("redo"), deadline_s=120)
    first_run = collector.seen.events_of("redo")[0].run_id  # its `accepted`
    await _cancel(topics, "redo")
    async with asyncio.timeout(30):
        while not any(e.get("event") == "request.cancelling" for e in first.events()):
            await asyncio.sleep(0.01)
    await first.kill()
    rendered = _hits(site, urls)

    second = await start_worker("second", **STATIC)

    def second_run_read(seen: Collected) -> bool:
        """Its terminal event and a result for every URL (another topic, read apart)."""
        ends = [e for e in seen.terminal("redo") if e.run_id != first_run]
        return bool(ends) and {r.url for r in seen.results_of("redo")} >= set(urls)

    await collector.wait_until(second_run_read, deadline_s=180)
    [terminal] = [e for e in collector.seen.terminal("redo") if e.run_id != first_run]
    finished = await second.wait_for_log("request.finished", 30)  # the second worker ran it
    assert (finished["request_id"], finished["outcome"]) == ("redo", "cancelled")
    assert terminal.type == EventType.CANCELLED
    # A page the first run dispatched is answered by a fetcher with that run's run_id (its
    # task's); the second run counts it. Every result of the request is `cancelled`.
    results = collector.seen.results_of("redo")
    assert {r.url for r in results} == set(urls)
    assert all(r.error.code == ErrorCode.CANCELLED for r in results)
    assert (terminal.succeeded, terminal.failed, terminal.cancelled) == (0, 0, len(urls))
    assert _hits(site, urls) == rendered


async def _cli(topics, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        *args,
        env=os.environ | topics.env(),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 240)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_status_and_follow_from_other_processes(topics, collector, site, start_worker):
    """`crawlstream status` right after a submit (no worker yet) says unknown and exits 0;
    `crawlstream follow ID --json` in another process streams the request to its end; then
    `status` reports the final counts."""
    async with CrawlClient(topics.settings()) as client:
        await client.submit([site.url(f"/page/{900 + i}") for i in range(3)], request_id="st")
    code, out = await _cli(topics, "status", "st")
    assert code == 0
    assert out.strip().startswith("st: unknown")

    follow = asyncio.create_task(_cli(topics, "follow", "st", "--json"))
    await start_worker()
    code, out = await follow
    assert code == 0, out
    lines = [json.loads(line) for line in out.splitlines()]
    assert sum("result_id" in line and "ok" in line for line in lines) == 3
    events = [line["type"] for line in lines if "type" in line]  # results carry no type
    assert events[-1] == "completed"  # the last result may be read after it: another topic

    code, out = await _cli(topics, "status", "st", "--json")
    assert code == 0
    status = json.loads(out)
    assert (status["state"], status["total"], status["succeeded"]) == ("completed", 3, 3)
    assert status["worker"] == "w1"
    code, out = await _cli(topics, "status", "never-submitted")
    assert code == 0
    assert out.strip().startswith("never-submitted: unknown")


# The tests sharing one worker (`shared_worker_with`) come last: a shared worker stops with the
# module, and these do not idle through the tests before them.


async def test_cancel_stops_a_running_request_within_three_seconds(
    shared_worker_with, metrics_port, site
):
    """A 30-URL request of 2 s pages cancelled after its 3rd result: the terminal `cancelled`
    (with the reason) arrives within 3 s of the cancel, every URL has exactly one result, no
    page event follows the terminal, and the worker's open Chromium pages drop to 0."""
    port = metrics_port
    run = await shared_worker_with(CRAWL_METRICS_PORT=str(port))
    topics, collector = run.topics, run.collector
    urls = _slow_urls(site, "c30", 30)
    await produce(topics, [_request("c30", urls)])
    await collector.wait_until(lambda seen: len(seen.results_of("c30")) >= 3, deadline_s=180)
    assert await _metric(port, "crawl_browser_pages_open")

    cancelled_at = await _cancel(topics, "c30", "user asked")
    await _wait_terminal_within(collector, "c30", 3.0)
    assert asyncio.get_running_loop().time() - cancelled_at <= 3.0

    results = _assert_exact(collector, "c30", urls, EventType.CANCELLED)
    [terminal] = collector.seen.terminal("c30")
    assert terminal.detail == "cancelled: user asked"
    assert terminal.succeeded >= 3
    assert terminal.cancelled > 0
    assert all(r.ok or r.error.code == ErrorCode.CANCELLED for r in results)
    async with asyncio.timeout(10):
        while await _metric(port, "crawl_browser_pages_open") != 0:
            await asyncio.sleep(0.2)


async def test_a_cancel_produced_before_its_request_renders_nothing(
    shared_worker_with, metrics_port, site
):
    """`crawlstream cancel` before the request is produced: the request ends `cancelled` with
    an `accepted`, a `cancelled` result per URL, and no page rendered (the site saw no hit)."""
    run = await shared_worker_with(CRAWL_METRICS_PORT=str(metrics_port))
    topics, collector = run.topics, run.collector
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "service",
        "cancel",
        "early",
        "--reason",
        "changed my mind",
        env=os.environ | topics.env(),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    assert out.decode().strip() == "early: cancel sent"
    urls = _slow_urls(site, "early", 5, ms=500)
    await produce(topics, [_request("early", urls)])

    await _wait_terminal_within(collector, "early", 120)
    results = _assert_exact(collector, "early", urls, EventType.CANCELLED)
    assert all(r.error.code == ErrorCode.CANCELLED for r in results)
    assert collector.seen.events_of("early")[0].type == EventType.ACCEPTED
    assert _hits(site, urls) == 0


async def test_a_worker_asked_with_sigusr1_says_where_its_tasks_wait_and_goes_on(
    shared_worker_with, metrics_port
):
    """`kill -USR1` a running worker: one `task.waiting` line per task, naming where it
    waits (its consumers' poll loops among them), and the worker goes on serving."""
    run = await shared_worker_with(CRAWL_METRICS_PORT=str(metrics_port))
    lines = await asyncio.to_thread(run.worker.tasks_now)
    assert lines is not None
    waiting = [json.loads(line) for line in lines.splitlines()]
    assert all(entry["event"] == "task.waiting" and entry["at"] for entry in waiting)
    assert any("consumer.py" in entry["at"] for entry in waiting)
    assert run.worker.process is not None
    assert run.worker.process.returncode is None
    assert await _metric(metrics_port, "crawl_browser_pages_open") is not None
