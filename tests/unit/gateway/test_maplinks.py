"""`POST /v2/map`'s answer from frontier records (pure)."""

from __future__ import annotations

from service.contracts import FrontierRecord, RecordSource
from service.gateway.maplinks import map_links, map_plan

SOURCE = RecordSource(topic="r", partition=0, offset=0)


def record(kind, links, url=None):
    return FrontierRecord(
        request_id="m", source=SOURCE, kind=kind, url=url, links=tuple(links), outcome=None
    )


RECORDS = [
    record("sitemap", ["https://ex.com/s1", "https://other.org/x", "https://docs.ex.com/d"]),
    record("page", ["https://ex.com/a", "https://ex.com/s1"], url="https://ex.com/"),
]


def test_seed_links_and_sitemap_unique_on_the_site_and_its_subdomains():
    plan = map_plan({"url": "https://ex.com/"})
    assert map_links(plan, RECORDS) == [
        "https://ex.com/",
        "https://ex.com/a",
        "https://ex.com/s1",
        "https://docs.ex.com/d",
    ]


def test_sitemap_only_skip_search_limit_and_no_subdomains():
    only = map_plan({"url": "https://ex.com/", "sitemap": "only"})
    assert map_links(only, RECORDS) == ["https://ex.com/s1", "https://docs.ex.com/d"]
    skip = map_plan({"url": "https://ex.com/", "sitemap": "skip", "includeSubdomains": False})
    assert map_links(skip, RECORDS) == ["https://ex.com/", "https://ex.com/a", "https://ex.com/s1"]
    searched = map_plan({"url": "https://ex.com/", "search": "S1", "limit": 1})
    assert map_links(searched, RECORDS) == ["https://ex.com/s1"]
    assert not skip.spec.sitemap
    assert only.spec.max_pages == 1
