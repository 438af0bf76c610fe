"""A memory limit on a parent cgroup (a pod with a sidecar) is enforced like the worker's own."""

from __future__ import annotations

import pytest
from cgroups import MemoryCgroup, MemoryHolder, writable_hierarchy
from harness import produce

from service.contracts import CrawlOptions, CrawlRequest, dump

pytestmark = pytest.mark.integration

MIB = 2**20
POD_LIMIT_BYTES = 1228 * MIB
"""The pod's limit in issue 19: about 1.2 GiB for the worker and its sidecar together."""

SIDECAR_BYTES = 504 * MIB
"""What the sidecar in the sibling cgroup holds: the worker has about 720 MiB of the pod."""

REQUESTS = 6
URLS_PER_REQUEST = 10
PAGE_ALLOC_MB = 100
"""Each page's script allocates and holds this much (issue 19: 60 pages of 100 MB)."""


@pytest.mark.skipif(writable_hierarchy() is None, reason="no writable memory cgroup here")
async def test_a_parent_limit_with_a_sidecar_in_a_sibling_cgroup_kills_nothing(
    topics, collector, site, start_worker
):
    """Issue 19: a 1,228 MiB pod limit, the worker unlimited in one child cgroup and a sidecar
    holding 504 MiB in a sibling: 60 pages that each allocate 100 MB all end ok, the kernel
    kills nothing (not a renderer, not the sidecar), and the worker says the pod's limit binds."""
    with (
        MemoryCgroup(POD_LIMIT_BYTES) as pod,
        MemoryCgroup(None, parent=pod) as own,
        MemoryCgroup(None, parent=pod) as sibling,
    ):
        async with MemoryHolder(sibling, SIDECAR_BYTES) as sidecar:
            assert sibling.usage_bytes() >= SIDECAR_BYTES
            worker = await start_worker("pod", preexec=own.join_current)
            requests = {
                f"pod-{r}": [
                    site.url(f"/alloc?mb={PAGE_ALLOC_MB}&hold=1&i={r}-{u}")
                    for u in range(URLS_PER_REQUEST)
                ]
                for r in range(REQUESTS)
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
                lambda seen: all(seen.terminal(rid) for rid in requests), deadline_s=600
            )
            assert await worker.terminate() == 0
            kills = {cgroup.path.name: cgroup.oom_kills() for cgroup in (pod, own, sibling)}
            assert sidecar.alive
        assert own.pids() == []
    assert sum(kills.values()) == 0, kills  # v1 counts a kill in the victim's own cgroup
    for rid, urls in requests.items():
        results = {r.url: r for r in collector.seen.results_of(rid)}
        assert sorted(results) == sorted(urls)
        assert all(r.ok for r in results.values()), [r.error for r in results.values()]
    started = next(e for e in worker.events() if e["event"] == "memory.limit")
    assert (started["bound_by"], started["limit_mib"]) == ("parent", POD_LIMIT_BYTES // MIB)
