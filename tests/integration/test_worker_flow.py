"""A worker group end to end: real broker, real Chromium, the local test site."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

import pytest
from harness import produce, wait_for_group

from service.contracts import CrawlOptions, CrawlRequest, EventType, dump

pytestmark = pytest.mark.integration


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


def _assert_run_well_formed(events: list, total: int) -> None:
    """Per run: seq 0..n without gaps, accepted first, exactly one terminal event, last."""
    by_run = defaultdict(list)
    for event in events:
        by_run[event.run_id].append(event)
    finished = [run for run in by_run.values() if any(e.is_terminal for e in run)]
    assert len(finished) >= 1
    for run in by_run.values():
        assert [e.seq for e in run] == list(range(len(run)))
        assert run[0].type == EventType.ACCEPTED
        assert run[0].total == total
    for run in finished:
        assert sum(e.is_terminal for e in run) == 1
        assert run[-1].is_terminal


async def test_twenty_requests_through_two_workers(topics, collector, site, start_worker):
    """20 requests of 5 URLs through two workers: one result per URL, one terminal event each,
    seq without gaps, one key and partition per request, and both workers did work (over the
    HTTP path: the flow, not the render path, is under test here)."""
    await asyncio.gather(start_worker("w1"), start_worker("w2"))
    await wait_for_group(topics, members=2)  # both hold partitions before any work arrives
    requests = {f"req-{i}": [site.url(f"/page/{i * 5 + j}") for j in range(5)] for i in range(20)}
    await produce(topics, [_request(rid, urls, render="http") for rid, urls in requests.items()])

    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in requests), deadline_s=300
    )
    seen = collector.seen
    for rid, urls in requests.items():
        terminal = seen.terminal(rid)
        assert [e.type for e in terminal] == [EventType.COMPLETED]
        assert (terminal[0].total, terminal[0].succeeded, terminal[0].failed) == (5, 5, 0)
        results = {r.url: r for r in seen.results_of(rid) if r.run_id == terminal[0].run_id}
        assert sorted(results) == sorted(urls)
        assert all(r.ok and r.status_code == 200 and r.markdown for r in results.values())
        _assert_run_well_formed(seen.events_of(rid), total=5)
        partitions = {partition for _, partition in seen.keys[rid]}
        assert len(partitions) == 1
    workers = Counter(e.worker for e, _ in seen.events if e.type == EventType.COMPLETED)
    assert set(workers) == {"w1", "w2"}


async def test_javascript_content_with_wait_for(topics, collector, site, start_worker):
    """Content inserted by a timer appears in markdown and text when `wait_for` names it."""
    await start_worker()
    url = site.url("/js/late?delay_ms=700&n=7")
    await produce(
        topics,
        [
            _request(
                "late-1",
                [url],
                wait_for="#late",
                formats=["markdown", "text"],
            )
        ],
    )
    await collector.wait_until(lambda seen: seen.terminal("late-1"), deadline_s=120)
    [result] = collector.seen.results_of("late-1")
    assert result.ok
    assert "Late content 7" in (result.markdown or "")
    assert "Late content 7" in (result.text or "")


async def test_failed_pages_get_error_codes_and_requests_complete(
    topics, collector, site, start_worker
):
    """404, 500, refused connection and a too-slow page each give a failed result with the
    right code, and their requests still complete. Only the slow page's request has a short
    page timeout (2 s against its 20 s): on a loaded machine a 500 page once took longer
    than 2 s to render and ended `timeout`."""
    closed_port = _closed_port()
    topics.extra_env["CRAWL_ALLOWED_HOSTS"] += f",127.0.0.1:{closed_port}"
    await start_worker()
    cases = {
        "e-404": (site.url("/status/404"), "http_error", 404),
        "e-500": (site.url("/status/500"), "http_error", 500),
        "e-refused": (f"http://127.0.0.1:{closed_port}/", "connection", None),
        "e-slow": (site.url("/slow?ms=20000"), "timeout", None),
    }
    short = {"e-slow": {"timeout_ms": 2000}}
    await produce(
        topics, [_request(rid, [url], **short.get(rid, {})) for rid, (url, _, _) in cases.items()]
    )
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in cases), deadline_s=120
    )
    for rid, (_url, code, status) in cases.items():
        [result] = collector.seen.results_of(rid)
        assert not result.ok
        assert result.error is not None
        assert (result.error.code.value, result.status_code) == (code, status), rid
        [terminal] = collector.seen.terminal(rid)
        assert (terminal.type, terminal.failed) == (EventType.COMPLETED, 1)


def _closed_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.long_running
async def test_kill_one_worker_loses_nothing(topics, collector, site, start_worker):
    """Kill -9 one of two workers mid-flight: every request still ends (from the survivor);
    duplicates carry the same result_id. (HTTP path: what a kill loses is Kafka's business,
    whichever path renders; a kill while the browser renders is `test_failover`'s.)"""
    doomed, survivor = await asyncio.gather(start_worker("doomed"), start_worker("survivor"))
    requests = {
        f"k-{i}": [site.url(f"/slow?ms=1500&i={i}-{j}") for j in range(4)] for i in range(12)
    }
    await produce(topics, [_request(rid, urls, render="http") for rid, urls in requests.items()])
    await collector.wait_until(
        lambda seen: any(e.worker == "doomed" for e, _ in seen.events), deadline_s=120
    )
    await doomed.kill()
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in requests), deadline_s=300
    )
    for rid, urls in requests.items():
        completed = [e for e in collector.seen.terminal(rid) if e.type == EventType.COMPLETED]
        assert completed, rid
        by_url = defaultdict(set)
        for result in collector.seen.results_of(rid):
            by_url[result.url].add(result.result_id)
        assert sorted(by_url) == sorted(urls)
        assert all(len(ids) == 1 for ids in by_url.values())
    assert survivor.process.returncode is None


async def test_sigterm_drains_and_exits_zero(topics, collector, site, start_worker, tmp_path):
    """SIGTERM mid-flight: the worker finishes or hands back its requests and exits 0;
    a second worker then completes whatever was handed back. The first one's Playwright
    driver left the code it compiled in the user's cache for the next start."""
    cache = tmp_path / "cache"
    first = await start_worker("first", XDG_CACHE_HOME=str(cache))
    requests = {f"s-{i}": [site.url(f"/slow?ms=1000&s={i}")] for i in range(6)}
    await produce(topics, [_request(rid, urls) for rid, urls in requests.items()])
    await collector.wait_until(lambda seen: len(seen.events) > 0, deadline_s=120)
    assert await first.terminate() == 0
    stopped = [e["event"] for e in first.events()]
    assert "worker.stopped" in stopped
    compiled = cache / "crawlstream" / "node-compile-cache"
    assert any(path.is_file() for path in compiled.rglob("*")), "the driver kept no code"
    await start_worker("second")
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in requests), deadline_s=180
    )
