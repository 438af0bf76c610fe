"""Page slots under one big, slow request: a small request taken after it is not held up."""

from __future__ import annotations

import pytest
from harness import produce

from service.contracts import CrawlOptions, CrawlRequest, EventType, dump

pytestmark = pytest.mark.integration

PAGE_TIMEOUT_MS = 3000
"""The big request's own page timeout: each of its hanging pages takes this long."""

PAGE_TIME_S = PAGE_TIMEOUT_MS / 1000

START_DEADLINE_S = 60.0
"""Time for the worker to join its group and take the big request."""

SLACK_S = 10.0
"""Time for the small request itself: taken from Kafka, a context opened, one page, published."""


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


async def test_small_request_finishes_while_a_big_request_of_hanging_pages_runs(
    topics, collector, site, start_worker
):
    """With default limits, a 1-URL request produced right after a 100-URL request of hanging
    pages completes within two page-times while the big one is still running: the big
    request's queued pages neither keep intake paused nor keep the small one from a slot."""
    await start_worker()
    hanging = [site.url(f"/slow?ms=600000&i={i}") for i in range(100)]
    await produce(topics, [_request("big", hanging, timeout_ms=PAGE_TIMEOUT_MS)])
    await collector.wait_until(lambda seen: seen.events_of("big"), deadline_s=START_DEADLINE_S)
    await produce(topics, [_request("small", [site.url("/page/1")])])
    await collector.wait_until(
        lambda seen: seen.terminal("small"), deadline_s=2 * PAGE_TIME_S + SLACK_S
    )

    [terminal] = collector.seen.terminal("small")
    assert (terminal.type, terminal.succeeded) == (EventType.COMPLETED, 1)
    assert collector.seen.terminal("big") == []
