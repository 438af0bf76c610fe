"""The reference deep crawl admits what the issue's rules say, on hand-checked parts of the
graph site's graph (computed, not served)."""

from __future__ import annotations

import pytest
from graphsite import Graph
from reference_crawl import Admitted, reference_crawl

GRAPH = Graph("http://127.0.0.1:8000")
"""The graph of a graph site; no server is needed to read it."""

EVERYTHING = 10**6
"""A depth and a budget no crawl of the finite part of the site reaches."""

NOT_THE_TRAP = (r"/calendar",)
"""Exclude patterns that keep a crawl out of the endless calendar."""

FINITE_PAGES = 1 + 270 + 3 + 20 + 2
"""Home, articles, /p/7's three query variants, docs, /js-only and /go/private: every page
links reach, the calendar trap and the nofollow-only page aside."""


def url(path: str) -> str:
    return GRAPH.url(path)


def urls(admitted: list[Admitted]) -> list[str]:
    return [page.url for page in admitted]


def crawl(*seeds: str, **options) -> list[Admitted]:
    options.setdefault("max_depth", EVERYTHING)
    options.setdefault("max_pages", EVERYTHING)
    return reference_crawl(GRAPH, [url(seed) for seed in seeds], **options)


def test_depth_zero_admits_only_the_seeds_deduped_in_order():
    """Depth 0 admits the seeds alone, once each after normalisation, as roots."""
    seeds = [url("/p/9"), url("/p/1") + "#x", "HTTP://127.0.0.1:8000/p/%31", url("/p/9")]
    admitted = reference_crawl(GRAPH, seeds, max_depth=0, max_pages=10)
    assert admitted == [Admitted(url("/p/9"), 0, None), Admitted(url("/p/1"), 0, None)]


def test_seeds_ignore_scope_and_filters_but_not_the_budget():
    """Seeds are admitted whatever include/exclude/prefix say, up to max_pages."""
    admitted = crawl("/p/1", "/docs/a/", "/", max_depth=0, max_pages=2, exclude=["/p/"])
    assert urls(admitted) == [url("/p/1"), url("/docs/a/")]


def test_depth_one_from_home_is_its_distinct_in_scope_links_in_document_order():
    """Home's links, fragments and duplicates merged, off-site ones left out, parent home."""
    admitted = crawl("/", max_depth=1)
    paths = ["/p/0", "/p/1", "/p/2", "/p/3", "/p/4", "/p/5"]
    paths += ["/docs/", "/calendar?month=0", "/go/private"]
    expected = [Admitted(url(path), 1, url("/")) for path in paths]
    assert admitted == [Admitted(url("/"), 0, None), *expected]


def test_link_variants_normalise_to_one_node():
    """On /p/1, `/p/5#top`, `HTTP://…/p/7`, `/p/%37` and `/p/8` twice are /p/5, /p/7, /p/8."""
    admitted = crawl("/p/1", max_depth=1)
    expected = ["/p/1", "/p/248", "/p/126", "/p/4", "/p/3", "/p/5", "/p/7", "/p/8"]
    assert urls(admitted) == [url(path) for path in expected]


def test_query_orders_are_distinct_nodes_unless_ignore_query():
    """/p/7?a=1&b=2, ?b=2&a=1 and ?a=1&a=1 are three pages; with ignore_query one, /p/7."""
    variants = [url("/p/7?a=1&b=2"), url("/p/7?b=2&a=1"), url("/p/7?a=1&a=1")]
    kept = urls(crawl("/p/2", max_depth=1))
    assert kept[-3:] == variants
    merged = urls(crawl("/p/2", max_depth=1, ignore_query=True))
    assert merged == [*kept[:-3], url("/p/7")]


def test_nofollow_links_are_skipped_unless_told_otherwise():
    """/nofollow-only is reached only through nofollow links: never, unless not respected."""
    assert url("/nofollow-only") not in urls(crawl("/", exclude=NOT_THE_TRAP))
    followed = crawl("/p/3", max_depth=1, respect_nofollow=False)
    assert Admitted(url("/nofollow-only"), 1, url("/p/3")) in followed


def test_script_inserted_link_is_followed_last():
    """/p/4's script appends the only link to /js-only; the crawl follows it, last."""
    admitted = crawl("/p/4", max_depth=1)
    assert admitted[-1] == Admitted(url("/js-only"), 1, url("/p/4"))


def test_without_scripts_the_script_inserted_link_is_not_followed():
    """The HTTP path reads /p/4 as served: /js-only is never discovered, the rest is kept."""
    with_scripts = crawl("/p/4", max_depth=1)
    without = crawl("/p/4", max_depth=1, scripts=False)
    assert without == with_scripts[:-1]


def test_failed_pages_are_not_expanded():
    """A 404 seed and the 302 of /go/private are admitted, but no link is followed from them."""
    assert urls(crawl("/nope", "/go/private")) == [url("/nope"), url("/go/private")]


def test_whole_site_is_every_page_links_reach():
    """From home: articles, query variants, docs, /js-only, /go/private; no orphan, nothing
    off-site."""
    admitted = crawl("/", exclude=NOT_THE_TRAP)
    assert len(admitted) == len(set(urls(admitted))) == FINITE_PAGES
    assert all(page.startswith("http://127.0.0.1:8000/") for page in urls(admitted))
    assert not any("/orphan/" in page for page in urls(admitted))


@pytest.mark.parametrize("budget", [1, 2, 9, 10, 11, 57, 200])
def test_budget_cuts_the_unbounded_crawl_in_bfs_order(budget):
    """max_pages admits exactly the first max_pages pages of the same crawl without a budget."""
    unbounded = crawl("/", max_depth=4, exclude=NOT_THE_TRAP)
    assert len(unbounded) > 200
    assert crawl("/", max_depth=4, max_pages=budget, exclude=NOT_THE_TRAP) == unbounded[:budget]


@pytest.mark.parametrize(
    "options",
    [
        {"max_depth": 3},
        {"max_depth": 6, "max_pages": 150, "sitemap": True},
        {"max_depth": 4, "scope": "prefix", "ignore_query": True},
        {"max_depth": 5, "respect_nofollow": False, "exclude": ["/docs/b/"]},
    ],
)
def test_admissions_form_a_bfs_tree_of_followable_links(options):
    """Depths never decrease; every non-root page is a followable link of an earlier page one
    level up; no URL twice."""
    admitted = crawl("/", **options)
    position = {page.url: i for i, page in enumerate(admitted)}
    assert len(position) == len(admitted)
    assert [page.depth for page in admitted] == sorted(page.depth for page in admitted)
    for i, page in enumerate(admitted):
        if page.parent_url is None:
            assert page.depth == 0
            continue
        parent = admitted[position[page.parent_url]]
        assert position[page.parent_url] < i
        assert parent.depth == page.depth - 1
        targets = [link.target for link in GRAPH.links_of(parent.url)]
        if options.get("ignore_query"):
            targets = [target.partition("?")[0] for target in targets]
        assert page.url in targets


def test_calendar_trap_is_bounded_by_depth_and_by_budget():
    """The endless calendar yields depth + 1 months under max_depth, max_pages under a budget."""
    only_calendar = [r"/calendar\?"]
    by_depth = crawl("/calendar?month=0", max_depth=5, include=only_calendar)
    assert urls(by_depth) == [url(f"/calendar?month={m}") for m in range(6)]
    by_budget = crawl("/calendar?month=0", max_pages=7, include=only_calendar)
    assert urls(by_budget) == [url(f"/calendar?month={m}") for m in range(7)]
    assert len(crawl("/", max_pages=400)) == 400


def test_ignore_query_collapses_the_calendar():
    """With ignore_query every month is /calendar, so the trap is one page."""
    admitted = crawl("/calendar?month=3", ignore_query=True, include=["/calendar"])
    assert admitted == [Admitted(url("/calendar"), 0, None)]


def test_sitemap_adds_orphans_at_depth_zero():
    """With sitemap the listed pages not yet seen follow the seeds as roots, orphans included."""
    admitted = crawl("/", max_depth=0, sitemap=True)
    listed = ["/", "/p/0", "/p/100", "/docs/", *(f"/orphan/{k}" for k in range(10))]
    assert admitted == [Admitted(url(path), 0, None) for path in listed]
    whole = crawl("/", sitemap=True, exclude=NOT_THE_TRAP)
    assert len(whole) == FINITE_PAGES + 10


def test_sitemap_urls_obey_scope_filters_and_budget():
    """Sitemap URLs out of the prefix, excluded, or beyond max_pages are not admitted."""
    admitted = crawl("/", max_depth=0, sitemap=True, exclude=["/orphan/[2-9]"], max_pages=5)
    assert urls(admitted) == [url(p) for p in ("/", "/p/0", "/p/100", "/docs/", "/orphan/0")]
    in_docs = crawl("/docs/a/", max_depth=0, sitemap=True, scope="prefix")
    assert urls(in_docs) == [url("/docs/a/")]


def test_prefix_scope_keeps_to_the_seed_directory():
    """From /docs/ the crawl is the 20 docs pages; from /docs/a/3 it is /docs/a/ and below."""
    docs = urls(crawl("/docs/", scope="prefix"))
    assert len(docs) == 20
    assert all(page.startswith(url("/docs/")) for page in docs)
    section = urls(crawl("/docs/a/3", scope="prefix"))
    assert sorted(section) == sorted(
        url(p) for p in ("/docs/a/", *(f"/docs/a/{i}" for i in range(5)))
    )


def test_base_href_moves_relative_links():
    """/docs/b/ has <base href="/docs/c/">: its `0` is /docs/c/0 and its `../b/0` is /docs/b/0."""
    children = urls(crawl("/docs/b/", max_depth=1))[1:]
    own = [url(f"/docs/b/{i}") for i in range(5)]
    assert children == [*own, url("/docs/c/0"), url("/docs/"), url("/p/9")]


def test_include_and_exclude_filter_discovered_urls():
    """include needs one match and exclude none, on the normalised URL."""
    docs_only = urls(crawl("/", include=["/docs/"]))
    assert docs_only[0] == url("/")
    assert len(docs_only) == 21
    assert all("/docs/" in page for page in docs_only[1:])
    without_b = urls(crawl("/docs/", scope="prefix", exclude=["/docs/b/"]))
    assert len(without_b) == 14
