"""Under a real, hard memory limit the governor keeps the kernel from killing anything."""

from __future__ import annotations

import pytest
from cgroups import MemoryCgroup, writable_hierarchy
from harness import produce

from service.contracts import CrawlOptions, CrawlRequest, dump

pytestmark = pytest.mark.integration

LIMIT_BYTES = 1200 * 2**20
"""About 1.2 GiB: a browser (~380 MB) plus a few pages that each allocate 60-150 MB."""


@pytest.mark.skipif(writable_hierarchy() is None, reason="no writable memory cgroup here")
@pytest.mark.long_running
async def test_memory_flood_under_a_hard_limit(topics, collector, site, start_worker):
    """100 pages whose scripts allocate 60-150 MB each, in 10-URL requests, through a worker
    limited to 1.2 GiB: no OOM kill, every page has a result, the consumer paused, and no
    Chromium process is left after the worker exits."""
    with MemoryCgroup(LIMIT_BYTES) as cgroup:
        worker = await start_worker("limited", preexec=cgroup.join_current)
        requests = {
            f"mem-{r}": [
                site.url(f"/alloc?mb={60 + ((r * 10 + u) * 37) % 91}&hold=1&i={r}-{u}")
                for u in range(10)
            ]
            for r in range(10)
        }
        options = CrawlOptions(wait_for="#done", timeout_ms=60_000, formats=["text"])
        await produce(
            topics,
            [
                (rid.encode(), dump(CrawlRequest(request_id=rid, urls=urls, options=options)))
                for rid, urls in requests.items()
            ],
        )
        await collector.wait_until(
            lambda seen: all(seen.terminal(rid) for rid in requests), deadline_s=900
        )
        assert await worker.terminate() == 0
        assert cgroup.oom_kills() == 0
        assert cgroup.pids() == []
    for rid, urls in requests.items():
        results = {r.url: r for r in collector.seen.results_of(rid)}
        assert sorted(results) == sorted(urls)
        assert all(r.ok for r in results.values()), [r.error for r in results.values()]
    events = [entry["event"] for entry in worker.events()]
    assert "memory.pause" in events
