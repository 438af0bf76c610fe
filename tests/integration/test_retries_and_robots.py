"""Transient failures are retried within bounds, end to end (Retry-After as Chromium reports
it). A 404 not retried and robots.txt obeyed are unit tests of the run on in-memory fakes
(tests/unit/worker/test_run.py); robots.txt through the egress proxy is in
tests/unit/http/test_robots.py."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from urllib.parse import quote

import pytest
from harness import produce

from service.contracts import CrawlOptions, CrawlRequest, EventType, dump

pytestmark = pytest.mark.integration

DEADLINE_S = 240
"""Generous: the machine is small and shared."""

PAGE_TIMEOUT_MS = 60_000
"""Room for three renders and the waits between them on a busy machine."""


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(
        request_id=request_id,
        urls=urls,
        options=CrawlOptions(timeout_ms=PAGE_TIMEOUT_MS, **options),
    )
    return request_id.encode(), dump(request)


def _final_results(seen, request_id: str) -> dict:
    [terminal] = seen.terminal(request_id)
    assert terminal.type == EventType.COMPLETED
    return {r.url: r for r in seen.results_of(request_id) if r.run_id == terminal.run_id}


def _retries(worker, url_part: str) -> list[str]:
    return [
        e["reason"]
        for e in worker.events()
        if e.get("event") == "page.retrying" and url_part in e.get("url", "")
    ]


async def test_flaky_pages_succeed_after_retries_and_give_up_past_the_limit(
    topics, collector, site, start_worker
):
    """A 503 page with `Retry-After: 1` and a 429 page with an HTTP-date `Retry-After` end ok
    on their third try; a page failing more often than `page_retries` ends `http_error`."""
    worker = await start_worker()
    run = uuid.uuid4().hex[:8]
    soon = quote(format_datetime(datetime.now(UTC) + timedelta(seconds=1), usegmt=True))
    paths = {
        "busy": f"/flaky/{run}-busy?fail=2&status=503&retry_after=1",
        "limited": f"/flaky/{run}-limited?fail=2&status=429&retry_after={soon}",
        "down": f"/flaky/{run}-down?fail=5&status=503",
    }
    await produce(topics, [_request(f"r-{name}", [site.url(p)]) for name, p in paths.items()])
    await collector.wait_until(
        lambda seen: all(seen.terminal(f"r-{name}") for name in paths), deadline_s=DEADLINE_S
    )

    for name in ("busy", "limited"):
        [result] = _final_results(collector.seen, f"r-{name}").values()
        assert (result.ok, result.status_code, result.error) == (True, 200, None), name
        assert site.hits[f"/flaky/{run}-{name}"] == 3, name
    [down] = _final_results(collector.seen, "r-down").values()
    assert not down.ok
    assert down.error is not None
    assert (down.error.code.value, down.status_code) == ("http_error", 503)
    assert site.hits[f"/flaky/{run}-down"] == 3
    assert _retries(worker, f"{run}-busy") == ["http_503", "http_503"]
    assert _retries(worker, f"{run}-limited") == ["http_429", "http_429"]
    assert _retries(worker, f"{run}-down") == ["http_503", "http_503"]
