"""A tracked deep crawl's reach is compared only with crawls of the same seeds, tag,
tenant, reading and limits."""

from __future__ import annotations

from datetime import UTC, datetime

from service.changes.reach import PriorReach, ReachRecord, reach_key
from service.contracts import ChangeTracking, CrawlOptions, CrawlRequest

TRACKING = ChangeTracking(tag="daily")


def _request(**changes: object) -> CrawlRequest:
    fields: dict[str, object] = {
        "request_id": "r",
        "urls": ["https://site.test/docs/"],
        "options": CrawlOptions(change_tracking=TRACKING),
        "crawl": {"max_pages": 50, "max_depth": 2},
    }
    return CrawlRequest.model_validate(fields | changes)


def test_the_same_crawl_again_has_the_same_key_whatever_its_request_id():
    assert reach_key(_request(), TRACKING) == reach_key(_request(request_id="r2"), TRACKING)
    assert reach_key(_request(urls=["https://SITE.test/docs/"]), TRACKING) == reach_key(
        _request(), TRACKING
    )


def test_another_tag_tenant_limit_or_seed_is_another_reach():
    base = reach_key(_request(), TRACKING)
    assert reach_key(_request(), ChangeTracking(tag="weekly")) != base
    assert reach_key(_request(metadata={"tenant": "acme"}), TRACKING) != base
    assert reach_key(_request(crawl={"max_pages": 10, "max_depth": 2}), TRACKING) != base
    assert reach_key(_request(urls=["https://site.test/blog/"]), TRACKING) != base


def test_a_run_of_the_same_request_compares_with_what_its_earlier_run_did():
    """A reach kept by a run that died before its terminal event is not the basis of the
    run that takes its request over: that one compares with the reach before it."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    older = PriorReach(request_id="r1", crawled_at=at, urls=("https://site.test/a",))
    kept = ReachRecord(key="k", request_id="r2", crawled_at=at, urls=(), before=older)
    assert kept.basis("r2") == older
    other = kept.basis("r3")
    assert other is not None
    assert (other.request_id, other.urls) == ("r2", ())
