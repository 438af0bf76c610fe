"""The graph site serves over HTTP exactly the link graph `links_of` describes."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest
from graphsite import serve_graph
from reference_crawl import reference_crawl
from selectolax.lexbor import LexborHTMLParser as HTMLParser
from yarl import URL

DEADLINE_SECONDS = 5.0
"""Upper bound on waiting for the site's counters to reach a state."""

HELD_MS = 60_000
"""A page delay far longer than any test, so requests stay in flight until cancelled."""

SCRIPT_HREF = re.compile(r'link\.href = "([^"]+)";\s*link\.textContent[^;]*;\s*'
                         r"document\.body\.appendChild\(link\)")  # fmt: skip
"""What the page's DOMContentLoaded handler assigns and appends to the end of the body."""

CALENDAR_MONTHS = 5
"""Calendar pages checked besides the finite rest of the site."""


def every_page(site) -> list[str]:
    """Every node a crawl can reach (sitemap and nofollow links included) but the calendar, a
    few calendar months, and a query variant."""
    whole = reference_crawl(
        site,
        [site.url("/")],
        max_depth=10**6,
        max_pages=10**6,
        sitemap=True,
        respect_nofollow=False,
        exclude=["/calendar"],
    )
    months = [site.url(f"/calendar?month={m}") for m in range(CALENDAR_MONTHS)]
    return [page.url for page in whole] + months + [site.url("/calendar")]


@pytest.fixture
async def client():
    async with aiohttp.ClientSession() as session:
        yield session


def served_links(page_url: str, body: str) -> list[tuple[str, str, bool, bool]]:
    """(href, target, nofollow, by_script) of a page's links, resolved here with yarl."""
    tree = HTMLParser(body)
    base_tag = tree.css_first("base")
    base = URL(page_url)
    if base_tag is not None:
        base = base.join(URL(base_tag.attributes["href"] or ""))
    anchors = [(a.attributes["href"] or "", a.attributes.get("rel") or "") for a in tree.css("a")]
    scripted = [href for s in tree.css("script") for href in SCRIPT_HREF.findall(s.text())]
    return [
        (href, str(base.join(URL(href)).with_fragment(None)), "nofollow" in rel.split(), False)
        for href, rel in anchors
    ] + [(href, str(base.join(URL(href))), False, True) for href in scripted]


async def test_served_anchors_are_the_graph_links_in_document_order(graph_site, client):
    """On every page a crawl can reach, the status is `status_of`, and the `<a href>`s,
    resolved against the page's URL or `<base href>`, plus the link its script appends are
    `links_of` that page, in order."""
    pages = every_page(graph_site)
    assert len(pages) > 300
    for node in pages:
        async with client.get(node, allow_redirects=False) as response:
            assert response.status == graph_site.status_of(node), node
            body = await response.text()
        links = graph_site.links_of(node)
        expected = [(k.href, k.target, k.nofollow, k.by_script) for k in links]
        assert (served_links(node, body) if response.status == 200 else []) == expected, node


async def test_link_variants_are_served_as_written(graph_site, client):
    """The raw HTML carries the variants the crawler must normalise: fragments, an upper-case
    scheme, `%37`, a duplicate, query orders, `<base href>`, nofollow and the script link."""
    bodies = {}
    for path in ("/p/1", "/p/2", "/p/3", "/p/4", "/p/11", "/docs/b/"):
        async with client.get(graph_site.url(path)) as response:
            bodies[path] = await response.text()
    assert f'href="HTTP://127.0.0.1:{graph_site.port}/p/7"' in bodies["/p/1"]
    assert 'href="/p/%37"' in bodies["/p/1"]
    assert bodies["/p/1"].count('href="/p/8"') == 2
    assert 'href="/p/7?b=2&amp;a=1"' in bodies["/p/2"]
    assert 'href="/nofollow-only" rel="nofollow"' in bodies["/p/3"]
    assert 'rel="external nofollow"' in bodies["/p/11"]
    assert "/js-only" not in [a.attributes["href"] for a in HTMLParser(bodies["/p/4"]).css("a")]
    assert '<base href="/docs/c/">' in bodies["/docs/b/"]


async def test_statuses_are_the_graph_statuses(graph_site, client):
    """/go/private is a 302 to a private address, unknown pages are 404s, as `status_of` says."""
    for path in ("/go/private", "/p/270", "/p/07", "/docs/a", "/calendar?month=x", "/nope"):
        async with client.get(graph_site.url(path), allow_redirects=False) as response:
            assert response.status == graph_site.status_of(graph_site.url(path)), path
    async with client.get(graph_site.url("/go/private"), allow_redirects=False) as response:
        assert response.headers["Location"] == "http://10.0.0.1/secret"
    assert graph_site.status_of(graph_site.url("/nope")) == 404
    assert graph_site.links_of(graph_site.url("/go/private")) == []


async def test_sitemap_and_robots_list_the_graph_sitemap(graph_site, client):
    """robots.txt allows everything and names /sitemap.xml, which lists `sitemap_urls()`."""
    async with client.get(graph_site.url("/robots.txt")) as response:
        robots = await response.text()
    assert "Allow: /\n" in robots
    assert f"Sitemap: {graph_site.url('/sitemap.xml')}\n" in robots
    async with client.get(graph_site.url("/sitemap.xml")) as response:
        assert response.content_type == "application/xml"
        locs = [loc.text() for loc in HTMLParser(await response.text()).css("urlset url loc")]
    assert locs == graph_site.sitemap_urls()
    assert graph_site.url("/orphan/9") in locs


async def test_pages_are_deterministic_and_weigh_2_to_5_kb(graph_site, client):
    """The same page twice is the same body; articles are 2-5 KB of HTML with a title."""
    for n in (0, 99, 269):
        bodies = []
        for _ in range(2):
            async with client.get(graph_site.url(f"/p/{n}")) as response:
                bodies.append(await response.text())
        assert bodies[0] == bodies[1]
        assert 2_000 <= len(bodies[0].encode()) <= 5_000
        assert f"<title>Article {n}</title>" in bodies[0]


async def test_hits_count_per_path_and_query(graph_site, client):
    """Hits count by decoded path and query as sent: `/p/%37` is `/p/7`, query orders apart."""
    keys = ("/p/7", "/p/7?a=1&b=2", "/p/7?b=2&a=1")
    before = [graph_site.hits[key] for key in keys]
    for path in ("/p/%37", "/p/7", "/p/7?a=1&b=2", "/p/7?b=2&a=1"):
        async with client.get(URL(graph_site.base_url + path, encoded=True)) as response:
            assert response.status == 200
    assert [graph_site.hits[key] - b for key, b in zip(keys, before, strict=True)] == [2, 1, 1]


async def wait_until(condition):
    async with asyncio.timeout(DEADLINE_SECONDS):
        while not condition():
            await asyncio.sleep(0.01)


async def test_concurrency_peak_counts_overlapping_page_requests(client):
    """Three held page requests are three in flight at once; robots.txt is neither held nor
    counted; a reset forgets the peak."""
    async with serve_graph(delay_ms=HELD_MS) as held:
        requests = [asyncio.create_task(client.get(held.url(f"/p/{n}"))) for n in range(3)]
        await wait_until(lambda: held.in_flight == 3)
        async with client.get(held.url("/robots.txt")) as response:
            assert response.status == 200
        for request in requests:
            request.cancel()
        await asyncio.gather(*requests, return_exceptions=True)
        await wait_until(lambda: held.in_flight == 0)
        assert held.max_in_flight == 3
        held.reset_counters()
        assert (held.max_in_flight, sum(held.hits.values())) == (0, 0)
