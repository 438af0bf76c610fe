"""A run's page plan: a list plan is the request's URLs once each; a deep plan admits the
seeds, then folds each finished page's links in admission order within the budget."""

from __future__ import annotations

from service.contracts import CrawlRequest, CrawlSpec, FrontierRecord, RecordSource
from service.frontier.plan import SitemapPages
from service.worker.coordinator.plans import LINKS_ON_LOOP, DeepPlan, ListPlan, plan_for

SITE = "http://site.test"
SOURCE = RecordSource(topic="requests", partition=0, offset=0)


def _page(url: str, *links: str, outcome: str = "succeeded") -> FrontierRecord:
    """A fetcher's `page` record: its links absolute, in document order."""
    return FrontierRecord.model_validate(
        {
            "request_id": "r",
            "source": SOURCE,
            "kind": "page",
            "url": url,
            "outcome": outcome,
            "links": links,
        }
    )


def _urls(plan: ListPlan | DeepPlan) -> list[str]:
    return [page.url for page in plan.admitted]


def test_a_list_plan_is_the_requests_urls_once_each_in_order():
    """Duplicates are dropped, order kept; every page at depth 0; nothing follows."""
    plan = ListPlan([f"{SITE}/b", f"{SITE}/a", f"{SITE}/b"])
    assert _urls(plan) == [f"{SITE}/b", f"{SITE}/a"]
    assert {(p.depth, p.parent_url) for p in plan.admitted} == {(0, None)}
    page = plan.admitted[0]
    assert plan.follow(page) is None
    assert plan.finished(_page(page.url, f"{SITE}/c")) == []
    assert plan.sitemap(SitemapPages((f"{SITE}/d",))) == []
    assert (plan.discovered, plan.delay_ms, plan.wants_sitemap) == (None, 0, False)
    assert plan.completion() is None


def test_plan_for_picks_the_plan_of_the_request():
    """`crawl` set: a deep plan; otherwise a list plan."""
    listed = CrawlRequest(request_id="l", urls=[f"{SITE}/"])
    deep = CrawlRequest(request_id="d", urls=[f"{SITE}/"], crawl=CrawlSpec(max_pages=3))
    assert isinstance(plan_for(listed), ListPlan)
    assert isinstance(plan_for(deep), DeepPlan)


def test_a_deep_plan_folds_links_in_admission_order_whatever_finishes_first():
    """Budget 4: the seed's two links are admitted; the second's links wait until the first
    has folded, so the last slot goes to the first page's link."""
    spec = CrawlSpec(max_pages=4, max_depth=2)
    plan = DeepPlan(spec, [f"{SITE}/"])
    assert plan.finished(_page(f"{SITE}/", f"{SITE}/a", f"{SITE}/b")) == plan.admitted[1:]
    assert _urls(plan) == [f"{SITE}/", f"{SITE}/a", f"{SITE}/b"]

    assert plan.finished(_page(f"{SITE}/b", f"{SITE}/b/1")) == []  # waits for /a to fold
    admitted = plan.finished(_page(f"{SITE}/a", f"{SITE}/a/1"))
    assert [(p.url, p.depth, p.parent_url) for p in admitted] == [(f"{SITE}/a/1", 2, f"{SITE}/a")]
    assert _urls(plan) == [f"{SITE}/", f"{SITE}/a", f"{SITE}/b", f"{SITE}/a/1"]
    assert plan.discovered == 5
    assert plan.completion() == "budget spent: max_pages 4 reached, 5 discovered"


def test_a_deep_plan_asks_for_links_only_above_its_depth_limit():
    """Pages below `max_depth` are fetched with their links (nofollow as the spec says);
    pages at it are not."""
    plan = DeepPlan(CrawlSpec(max_pages=5, max_depth=1, respect_nofollow=False), [f"{SITE}/"])
    [seed] = plan.admitted
    follow = plan.follow(seed)
    assert follow is not None
    assert follow.respect_nofollow is False
    [child] = plan.finished(_page(seed.url, f"{SITE}/a"))
    assert plan.follow(child) is None


def test_a_failed_page_adds_nothing_and_the_crawl_ends_exhausted():
    """A failed page's links are not followed; with the budget not spent, the completion
    says the frontier was exhausted."""
    plan = DeepPlan(CrawlSpec(max_pages=10), [f"{SITE}/"])
    assert plan.finished(_page(f"{SITE}/", f"{SITE}/a", outcome="failed")) == []
    assert plan.completion() == "frontier exhausted: 1 pages, 1 discovered"


def test_many_links_are_heavy_enough_for_a_thread():
    """More than LINKS_ON_LOOP links are filtered off the event loop."""
    plan = DeepPlan(CrawlSpec(max_pages=3), [f"{SITE}/"])
    few = _page(f"{SITE}/", *(f"/p/{i}" for i in range(LINKS_ON_LOOP)))
    many = _page(f"{SITE}/", *(f"/p/{i}" for i in range(LINKS_ON_LOOP + 1)))
    assert (plan.heavy(few), plan.heavy(many)) == (False, True)


def test_a_deep_plan_takes_its_sitemap_pages_and_paces_by_its_delay():
    """The sitemap's pages are admitted after the seeds; `delay_ms` and `sitemap` are the
    spec's."""
    plan = DeepPlan(CrawlSpec(max_pages=3, sitemap=True, delay_ms=250), [f"{SITE}/"])
    assert (plan.wants_sitemap, plan.delay_ms) == (True, 250)
    pages = plan.sitemap_pages([f"{SITE}/s/1", f"{SITE}/s/2", f"{SITE}/s/3"])
    assert pages.links == (f"{SITE}/s/1", f"{SITE}/s/2")
    assert pages.left_out == 1
    added = plan.sitemap(pages)
    assert [p.url for p in added] == [f"{SITE}/s/1", f"{SITE}/s/2"]
    assert plan.discovered == 4


def test_the_run_sees_either_plan_only_through_the_protocol():
    """What the run asks of a plan (`deep`, `expansion`, `fold`, `sitemap_pages`) answers
    for both kinds: a list's fold admits nothing, a deep crawl's folds the page's links."""
    request = CrawlRequest(request_id="r", urls=[f"{SITE}/"])
    listed = plan_for(request)
    deep = plan_for(request.model_copy(update={"crawl": CrawlSpec(max_pages=5)}))
    record = _page(f"{SITE}/", f"{SITE}/a", f"{SITE}/b")
    assert (listed.deep, deep.deep) == (False, True)
    assert listed.fold(record, listed.expansion(record)) == []
    assert [p.url for p in deep.fold(record, deep.expansion(record))] == [f"{SITE}/a", f"{SITE}/b"]
    assert listed.sitemap_pages([f"{SITE}/c"]) == SitemapPages()
    assert deep.sitemap_pages([f"{SITE}/c"]).links == (f"{SITE}/c",)
