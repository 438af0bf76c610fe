"""The admission fold: breadth first, exact budgets, and the same decisions in any finish order."""

from __future__ import annotations

import random

import pytest

from service.contracts import CrawlSpec
from service.frontier.plan import (
    LISTED_BEYOND_MAX,
    MAX_CANDIDATE_CHARS,
    MAX_CANDIDATES,
    CrawlPlan,
    Expansion,
)

SITE = "http://site.test"

GRAPH: dict[str, list[str]] = {
    "/": ["/a", "/b", "/c#top", "http://other.test/x"],
    "/a": ["/", "/a1", "/a2", "/b"],
    "/b": ["/b1", "/a1", "/B"],
    "/c": ["/c1", "/c2", "/c3"],
    "/a1": ["/deep"],
    "/B": [],
}
"""Path -> its links in document order (paths not listed have none)."""


def links_of(url: str) -> list[str]:
    path = url.removeprefix(SITE)
    return [SITE + link if link.startswith("/") else link for link in GRAPH.get(path, [])]


def crawl(spec: CrawlSpec, seeds: list[str], order: random.Random | None = None) -> CrawlPlan:
    """Run the fold to its end, finishing admitted pages in `order` (admission order if None)."""
    plan = CrawlPlan(spec, seeds)
    pending = [page.url for page in plan.admitted]
    if spec.sitemap:
        pending += [page.url for page in plan.add_sitemap([SITE + "/orphan", SITE + "/a"])]
    while pending:
        url = pending.pop(order.randrange(len(pending)) if order else 0)
        expansion = Expansion(plan.candidates(url, links_of(url)))
        pending += [page.url for page in plan.expanded(url, expansion)]
    assert plan.exhausted
    return plan


def paths(plan: CrawlPlan) -> list[str]:
    return [page.url.removeprefix(SITE) for page in plan.admitted]


def test_depth_zero_is_the_seeds_only() -> None:
    plan = crawl(CrawlSpec(max_pages=50, max_depth=0), [SITE + "/"])
    assert paths(plan) == ["/"]


def test_breadth_first_with_depth_and_parent() -> None:
    plan = crawl(CrawlSpec(max_pages=50, max_depth=2), [SITE + "/"])
    assert paths(plan) == ["/", "/a", "/b", "/c", "/a1", "/a2", "/b1", "/B", "/c1", "/c2", "/c3"]
    by_path = {page.url.removeprefix(SITE): page for page in plan.admitted}
    assert by_path["/a1"].depth == 2
    assert by_path["/a1"].parent_url == SITE + "/a"  # the first page in BFS order to link it
    assert by_path["/"].parent_url is None


def test_the_budget_cuts_in_breadth_first_order_and_is_never_exceeded() -> None:
    for budget in range(1, 12):
        plan = crawl(CrawlSpec(max_pages=budget, max_depth=5), [SITE + "/"])
        full = crawl(CrawlSpec(max_pages=50, max_depth=5), [SITE + "/"])
        assert paths(plan) == paths(full)[:budget]


@pytest.mark.parametrize("seed", range(20))
def test_any_finish_order_admits_the_same_pages(seed: int) -> None:
    spec = CrawlSpec(max_pages=7, max_depth=3)
    in_order = crawl(spec, [SITE + "/"])
    shuffled = crawl(spec, [SITE + "/"], random.Random(seed))
    assert shuffled.admitted == in_order.admitted


def test_out_of_scope_links_are_not_followed_nor_counted() -> None:
    plan = crawl(CrawlSpec(max_pages=50, max_depth=1), [SITE + "/"])
    assert all(page.url.startswith(SITE) for page in plan.admitted)
    assert plan.discovered == len(plan.admitted) == 4


def test_discovered_counts_urls_beyond_the_budget() -> None:
    plan = crawl(CrawlSpec(max_pages=2, max_depth=1), [SITE + "/"])
    assert len(plan.admitted) == 2
    assert plan.discovered == 4
    assert plan.full


def test_sitemap_pages_come_after_the_seeds_at_depth_zero() -> None:
    plan = crawl(CrawlSpec(max_pages=50, max_depth=1, sitemap=True), [SITE + "/"])
    assert paths(plan)[:3] == ["/", "/orphan", "/a"]
    assert {page.depth for page in plan.admitted[:3]} == {0}


def test_the_fold_waits_for_the_sitemap() -> None:
    plan = CrawlPlan(CrawlSpec(max_pages=50, max_depth=1, sitemap=True), [SITE + "/"])
    assert plan.expanded(SITE + "/", Expansion((SITE + "/a",))) == []
    assert not plan.exhausted
    admitted = plan.add_sitemap([SITE + "/a"])
    assert [page.url for page in admitted] == [SITE + "/a"]
    assert admitted[0].depth == 0  # the sitemap came first, so /a is not a child of /


def test_include_and_exclude_filter_discovered_urls_not_seeds() -> None:
    spec = CrawlSpec(max_pages=50, max_depth=3, include=[r"/a"], exclude=[r"/a2$"])
    plan = crawl(spec, [SITE + "/"])
    assert paths(plan) == ["/", "/a", "/a1"]


def test_canonical_marks_its_url_seen_only_when_asked() -> None:
    for follow, expected in ((False, ["/", "/a", "/b"]), (True, ["/", "/b"])):
        plan = CrawlPlan(CrawlSpec(max_pages=50, follow_canonical=follow), [SITE + "/"])
        canonical = plan.canonical_of(SITE + "/a")
        links = plan.candidates(SITE + "/", [SITE + "/a", SITE + "/b"])
        plan.expanded(SITE + "/", Expansion(links, canonical))
        assert paths(plan) == expected


def test_query_is_dropped_only_when_asked() -> None:
    links = [SITE + "/p?a=1&b=2", SITE + "/p?b=2&a=1", SITE + "/p#x"]
    kept = CrawlPlan(CrawlSpec(max_pages=9), [SITE + "/"]).candidates(SITE + "/", links)
    assert kept == (SITE + "/p?a=1&b=2", SITE + "/p?b=2&a=1", SITE + "/p")
    plan = CrawlPlan(CrawlSpec(max_pages=9, ignore_query=True), [SITE + "/"])
    assert plan.candidates(SITE + "/", links) == (SITE + "/p",)


def test_a_seed_that_is_no_url_is_still_admitted_for_its_result() -> None:
    plan = CrawlPlan(CrawlSpec(max_pages=5), ["ftp://files.test/x", SITE + "/"])
    assert [page.url for page in plan.admitted] == ["ftp://files.test/x", SITE + "/"]


def test_a_bad_pattern_is_refused_at_intake() -> None:
    with pytest.raises(ValueError, match="include"):
        CrawlSpec(max_pages=5, include=["(unclosed"])


def test_a_page_with_endless_links_keeps_a_bounded_record() -> None:
    plan = CrawlPlan(CrawlSpec(max_pages=5), [SITE + "/"])
    links = [f"{SITE}/{'x' * 300}/{i}" for i in range(20_000)]
    kept = plan.candidates(SITE + "/", links)
    assert 0 < len(kept) <= MAX_CANDIDATES
    assert sum(len(url) for url in kept) <= MAX_CANDIDATE_CHARS


def test_a_sitemap_is_cut_at_what_the_budget_can_admit() -> None:
    """50,000 sitemap URLs (duplicates, off-site and the seed among them) for a budget of 10:
    only the 9 pages the budget can still admit are kept for the log; the other unique
    in-scope URLs are counted as left out (and as discovered), never logged."""
    plan = CrawlPlan(CrawlSpec(max_pages=10, max_depth=1, sitemap=True), [SITE + "/"])
    listed = [SITE + "/", "http://other.test/x", SITE + "/p/0"]
    listed += [f"{SITE}/p/{n}" for n in range(50_000)]
    pages = plan.sitemap_pages(listed)
    assert pages.links == tuple(f"{SITE}/p/{n}" for n in range(9))
    assert pages.left_out == 50_000 - 9
    admitted = plan.add_sitemap(pages.links, left_out=pages.left_out)
    assert [page.url for page in admitted] == list(pages.links)
    assert plan.full
    assert plan.discovered == 50_001  # the seed and every unique in-scope sitemap URL


def test_a_cut_sitemap_lists_the_first_urls_beyond_the_budget_without_admitting_them() -> None:
    """A one-page job (the gateway's map) keeps no sitemap page to admit, yet its record lists
    the first `LISTED_BEYOND_MAX` URLs beyond the budget, in order, unique and in scope."""
    plan = CrawlPlan(CrawlSpec(max_pages=1, max_depth=1, sitemap=True), [SITE + "/"])
    listed = [SITE + "/", "http://other.test/x", SITE + "/p/0"]
    listed += [f"{SITE}/p/{n}" for n in range(LISTED_BEYOND_MAX + 10)]
    pages = plan.sitemap_pages(listed)
    assert pages.links == ()
    assert pages.beyond == tuple(f"{SITE}/p/{n}" for n in range(LISTED_BEYOND_MAX))
    assert pages.left_out == LISTED_BEYOND_MAX + 10
    assert plan.add_sitemap(pages.links, left_out=pages.left_out) == []


def test_a_logged_cut_sitemap_replays_to_the_same_decisions() -> None:
    """A next owner folding the logged (cut) sitemap and the logged page links reaches the
    same admitted pages, depths, `discovered` and budget as the run that logged them."""
    spec = CrawlSpec(max_pages=6, max_depth=2, sitemap=True)
    listed = [SITE + "/orphan", SITE + "/a", *(f"{SITE}/s/{n}" for n in range(100))]

    def run(sitemap: list[str] | None) -> tuple[CrawlPlan, tuple[str, ...], int]:
        plan = CrawlPlan(spec, [SITE + "/"])
        pages = plan.sitemap_pages(listed if sitemap is None else sitemap)
        plan.add_sitemap(pages.links, left_out=pages.left_out)
        for page in list(plan.admitted):
            plan.expanded(page.url, Expansion(plan.candidates(page.url, links_of(page.url))))
        return plan, pages.links, pages.left_out

    first, logged, left_out = run(None)
    replayed = CrawlPlan(spec, [SITE + "/"])
    replayed.add_sitemap(logged, left_out=left_out)
    for page in list(replayed.admitted):
        replayed.expanded(page.url, Expansion(replayed.candidates(page.url, links_of(page.url))))
    assert replayed.admitted == first.admitted
    assert len(replayed.admitted) == spec.max_pages
    assert replayed.discovered == first.discovered
