"""A tracked deep crawl's reach is compared only with crawls of the same seeds, tag,
tenant, reading and limits."""

from __future__ import annotations

from service.changes.reach import reach_key
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
