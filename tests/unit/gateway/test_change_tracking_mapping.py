"""Firecrawl's `changeTracking` format mapped to the contract and back (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.contracts import PageChange
from service.gateway.change_tracking import document_tracking
from service.gateway.errors import ApiError
from service.gateway.mapping import Limits, crawl_plan, scrape_plan

LIMITS = Limits(max_urls=10, max_crawl_pages=10, max_pages_per_host=10)
URL = "http://site.test/a"


def _tracking(fmt: object):
    _, plan = scrape_plan({"url": URL, "formats": ["markdown", fmt]}, limits=LIMITS)
    return plan.options.change_tracking


def test_git_diff_and_a_tag_turn_tracking_on_with_a_diff():
    tracking = _tracking({"type": "changeTracking", "modes": ["git-diff"], "tag": "daily"})
    assert tracking is not None
    assert (tracking.tag, tracking.diff) == ("daily", True)
    bare = _tracking("changeTracking")
    assert bare is not None
    assert (bare.tag, bare.diff) == (None, False)


def test_a_crawl_tracks_its_pages_with_its_scrape_options():
    fmt = {"type": "changeTracking", "modes": [], "tag": "t"}
    plan = crawl_plan({"url": URL, "scrapeOptions": {"formats": ["markdown", fmt]}}, limits=LIMITS)
    assert plan.scrape.options.change_tracking is not None
    assert plan.scrape.options.change_tracking.tag == "t"


@pytest.mark.parametrize(
    ("fmt", "named"),
    [
        ({"type": "changeTracking", "modes": ["json"]}, "formats.1.modes"),
        ({"type": "changeTracking", "modes": ["git-diff"], "prompt": "p"}, "formats.1.prompt"),
        ({"type": "changeTracking", "modes": ["svn"]}, "formats.1.modes"),
        ({"type": "changeTracking", "when": 1}, "formats.1.when"),
    ],
)
def test_what_the_cluster_cannot_do_is_a_400_naming_it(fmt: object, named: str):
    with pytest.raises(ApiError) as raised:
        _tracking(fmt)
    assert raised.value.status == 400
    assert named in raised.value.message


def test_a_result_becomes_firecrawls_change_tracking():
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    change = PageChange(status="changed", previous_fetched_at=at, diff="-a\n+b")
    assert document_tracking(change) == {
        "previousScrapeAt": "2026-01-02T03:04:05+00:00",
        "changeStatus": "changed",
        "visibility": "visible",
        "diff": {"text": "-a\n+b"},
    }
    assert document_tracking(PageChange(status="new"))["previousScrapeAt"] is None
    assert document_tracking(None) is None
