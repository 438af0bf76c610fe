"""Script-rendered content that arrives after `load`, with default options (issue 18).

Both tests share one worker (`run`) and tell their work apart by request id."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from harness import produce
from testsite import LATE_KINDS, late_marker

from service.contracts import CrawlOptions, CrawlRequest, ErrorCode, EventType, dump

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from conftest import SharedRun
    from testsite import TestSite

pytestmark = pytest.mark.integration

DEADLINE_S = 300.0
"""Generous: two shared cores, one worker, about fifty pages."""

PAGES = range(5)
"""One page per delay of the corpus: 100 ms, 300 ms, 700 ms, 1.2 s and 2 s."""


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


async def _crawl(topics, collector, messages: list[tuple[bytes, bytes]]) -> None:
    await produce(topics, messages)
    ids = [key.decode() for key, _ in messages]
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in ids), deadline_s=DEADLINE_S
    )


@pytest.fixture
async def run(
    shared_worker_with: Callable[..., Awaitable[SharedRun]],
    site: TestSite,
    other_site: TestSite,
) -> SharedRun:
    """The module's one default worker, on topics and a group of its own, with both sites
    of the module allowlisted (no test here needs either left out). `auto` learns per host
    name, and the first test teaches 127.0.0.1 to go straight to the browser, so the second
    test's `auto` page is on 127.0.0.2, a host the worker has not learned (its HTTP answer is
    judged first, as on a fresh worker)."""
    hosts = f"127.0.0.1:{site.port},127.0.0.2:{other_site.port}"
    return await shared_worker_with(CRAWL_ALLOWED_HOSTS=hosts)


async def test_late_content_comes_back_on_the_browser_path_and_auto(run, site):
    """Content inserted by timers 100 ms to 2 s after DOMContentLoaded or `load`, by what a
    `fetch()` returns, and by a framework mounting into `#app` is in every result's markdown
    and text, with default options, on `render: browser` (the default) and `auto` (which
    sends these pages to the browser). Reading at `load` returned most of them as `ok`
    without their article."""
    topics, collector = run.topics, run.collector
    urls = [site.url(f"/late/{kind}/{n}") for kind in LATE_KINDS for n in PAGES]
    await _crawl(
        topics,
        collector,
        [
            _request("late-browser", urls, formats=("markdown", "text")),
            _request("late-auto", urls, render="auto", formats=("markdown", "text")),
        ],
    )
    for request_id in ("late-browser", "late-auto"):
        [terminal] = collector.seen.terminal(request_id)
        assert terminal.type == EventType.COMPLETED
        results = {result.url: result for result in collector.seen.results_of(request_id)}
        assert sorted(results) == sorted(urls)
        missing = []
        for url, result in results.items():
            kind, n = url.rsplit("/", 2)[-2:]
            phrase = late_marker(kind, int(n))
            if not (
                result.ok and phrase in (result.markdown or "") and phrase in (result.text or "")
            ):
                missing.append((url, result.ok, result.error))
        assert not missing, (request_id, missing)
        assert {result.rendered_by for result in results.values()} == {"browser"}


async def test_a_page_that_never_fills_is_not_rendered_and_a_ticking_page_is_ok(run, other_site):
    """An app shell whose script fails is reported as `not_rendered`, never an empty `ok`; a
    page whose DOM never stops changing (a clock ticking every 50 ms) beside content present
    at load comes back `ok` with that content."""
    topics, collector, site = run.topics, run.collector, other_site
    never, clock = site.url("/late/never/1"), site.url("/late/clock/1")
    await _crawl(
        topics,
        collector,
        [
            _request("late-never", [never]),
            _request("late-never-auto", [never], render="auto"),
            _request("late-clock", [clock]),
        ],
    )
    for request_id in ("late-never", "late-never-auto"):
        [result] = collector.seen.results_of(request_id)
        assert not result.ok, request_id
        assert result.error is not None
        assert result.error.code == ErrorCode.NOT_RENDERED, (request_id, result.error)
        assert "app shell" in result.error.message
    [ticking] = collector.seen.results_of("late-clock")
    assert ticking.ok, ticking.error
    assert late_marker("clock", 1) in (ticking.markdown or "")
