"""Content options (issue 21) on both render paths, against the real broker, worker, egress
proxy and Chromium, with default settings: main content and tags, selector schemas,
structured data, PDFs (also behind a redirect and past `CRAWL_MAX_PDF_PAGES`), printing to
PDF, and bot challenges."""

from __future__ import annotations

import base64
import json

import pypdfium2 as pdfium
import pytest
from _content import (
    AROUND_ARTICLE,
    ARTICLE_WORDS,
    JSON_LD,
    OPEN_GRAPH,
    PDF_AUTHOR,
    PDF_TITLE,
    PRODUCTS,
    pdf_page_text,
)
from harness import produce

from service.contracts import CrawlOptions, CrawlRequest, ErrorCode, EventType, dump

pytestmark = pytest.mark.integration

DEADLINE_S = 240.0
"""Generous: two shared cores, one worker, a few pages per test."""

PATHS = ("browser", "http")

DEFAULT_MAX_PDF_PAGES = 100


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


async def _crawl(topics, collector, messages: list[tuple[bytes, bytes]]) -> dict[str, object]:
    """Each request's one result, by request id, after every request completed."""
    await produce(topics, messages)
    ids = [key.decode() for key, _ in messages]
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in ids), deadline_s=DEADLINE_S
    )
    results = {}
    for rid in ids:
        [terminal] = collector.seen.terminal(rid)
        assert terminal.type == EventType.COMPLETED, (rid, terminal)
        [results[rid]] = collector.seen.results_of(rid)
    return results


async def test_only_main_content_keeps_the_article_and_drops_the_rest(
    shared_topics, shared_collector, site, shared_worker
):
    """Navigation, site header, sidebar, cookie banner, dialog and footer are left out of
    markdown and text on both paths; without the option they are all there, as before."""
    url = site.url("/content/article")
    formats = ("markdown", "text")
    messages = [_request(f"main-{p}", [url], render=p, formats=formats) for p in PATHS]
    messages += [
        _request(f"main-on-{p}", [url], render=p, formats=formats, only_main_content=True)
        for p in PATHS
    ]
    results = await _crawl(shared_topics, shared_collector, messages)
    for path in PATHS:
        whole, main = results[f"main-{path}"], results[f"main-on-{path}"]
        for result in (whole, main):
            assert result.rendered_by == path
            assert ARTICLE_WORDS in result.markdown
            assert ARTICLE_WORDS in result.text
        for part, phrase in AROUND_ARTICLE.items():
            assert phrase in whole.text, (path, part)
            assert phrase not in main.text, (path, part)
            assert phrase not in main.markdown, (path, part)
        assert main.text.splitlines() == [
            "How kettles work",
            ARTICLE_WORDS,
            "Buy our kettle today",
            "Reader comments here",
        ]


async def test_include_and_exclude_tags_keep_and_drop_exactly_the_selected_parts(
    shared_topics, shared_collector, site, shared_worker
):
    """`include_tags` keeps the matched elements only, `exclude_tags` removes its matches
    (also inside included ones); links and metadata still come from the whole page."""
    url = site.url("/content/article")
    options = {
        "formats": ("text", "links", "metadata"),
        "include_tags": ("article", "aside"),
        "exclude_tags": (".promo", "section.comments"),
    }
    messages = [_request(f"tags-{p}", [url], render=p, **options) for p in PATHS]
    excluded = [
        _request(
            f"tags-out-{p}",
            [url],
            render=p,
            formats=("text",),
            exclude_tags=("header", "#cookie-notice"),
        )
        for p in PATHS
    ]
    results = await _crawl(shared_topics, shared_collector, messages + excluded)
    for path in PATHS:
        kept = results[f"tags-{path}"]
        assert kept.text.splitlines() == [
            AROUND_ARTICLE["aside"],
            "How kettles work",
            ARTICLE_WORDS,
        ], path
        assert kept.links.internal == [site.url("/content/other")]
        assert kept.metadata.title == "Kettle article"
        dropped = results[f"tags-out-{path}"].text
        assert AROUND_ARTICLE["header"] not in dropped
        assert AROUND_ARTICLE["nav"] not in dropped
        assert AROUND_ARTICLE["cookie"] not in dropped
        assert AROUND_ARTICLE["footer"] in dropped
        assert "Buy our kettle today" in dropped


PRODUCT_SCHEMA = {
    "base_selector": "ul.products li.product",
    "fields": [
        {"name": "title", "selector": "h2"},
        {"name": "link", "selector": "a", "type": "attribute", "attribute": "href"},
        {"name": "price", "selector": ".price", "type": "number"},
        {"name": "tags", "selector": ".tag", "type": "list", "default": []},
        {
            "name": "seller",
            "selector": ".seller",
            "type": "nested",
            "fields": [{"name": "name", "selector": ".name"}],
        },
        {"name": "rating", "selector": ".rating", "type": "number"},
    ],
}

EXPECTED_PRODUCTS = [
    {
        "title": item["title"],
        "link": item["href"],
        "price": price,
        "tags": item["tags"],
        "seller": {"name": f"Shop {item['title']}"},
        "rating": None,
    }
    for item, price in zip(PRODUCTS, (1299.5, 12.0, 30), strict=True)
]


async def test_a_product_list_gives_the_exact_objects_and_structured_data_comes_parsed(
    shared_topics, shared_collector, site, shared_worker
):
    """`extract` gives the result's `json` (no format needed); `structured_data` gives the
    page's JSON-LD, microdata and Open Graph, on both paths."""
    url = site.url("/content/products")
    messages = [
        _request(
            f"shop-{p}",
            [url],
            render=p,
            formats=("structured_data",),
            extract=PRODUCT_SCHEMA,
        )
        for p in PATHS
    ]
    messages.append(_request("shop-plain", [url], render="http"))
    results = await _crawl(shared_topics, shared_collector, messages)
    for path in PATHS:
        result = results[f"shop-{path}"]
        assert result.json_data == EXPECTED_PRODUCTS, path
        data = result.structured_data
        assert data.json_ld == [JSON_LD]
        assert data.open_graph == OPEN_GRAPH
        assert data.microdata == [
            {
                "type": "https://schema.org/Product",
                "properties": {"name": "Steel kettle", "sku": "K-1"},
            }
        ]
        assert result.markdown is None  # only the formats asked for
    plain = results["shop-plain"]
    assert (plain.json_data, plain.structured_data) == (None, None)


def _pdf_markdown(pages: int, read: int) -> str:
    return "\n\n".join(pdf_page_text(n, pages) for n in range(1, read + 1))


async def test_a_pdf_gives_its_pages_in_order_on_both_paths_also_behind_a_redirect(
    shared_topics, shared_collector, site, shared_worker
):
    """The browser path fetches the document as the HTTP path does instead of failing as a
    download; `auto` keeps it on HTTP; a redirect to the PDF is followed on every path."""
    direct = site.url("/content/manual.pdf?pages=4")
    moved = site.url("/content/manual-moved?pages=4")
    formats = ("markdown", "text", "metadata")
    messages = [
        _request(f"pdf-{how}-{p}", [url], render=p, formats=formats)
        for p in (*PATHS, "auto")
        for how, url in (("direct", direct), ("moved", moved))
    ]
    results = await _crawl(shared_topics, shared_collector, messages)
    for rid, result in results.items():
        assert result.ok, (rid, result.error)
        assert result.final_url == direct, rid
        assert result.markdown == _pdf_markdown(4, 4), rid
        assert result.text == result.markdown
        assert result.title == PDF_TITLE
        assert result.metadata.title == PDF_TITLE
        document = result.document
        assert (document.page_count, document.pages_read) == (4, 4), rid
        assert (document.title, document.author, document.text_layer) == (
            PDF_TITLE,
            PDF_AUTHOR,
            True,
        )
        assert not result.truncated
    assert {results[f"pdf-direct-{p}"].rendered_by for p in PATHS} == set(PATHS)
    assert results["pdf-direct-auto"].rendered_by == "http"


async def test_a_pdf_longer_than_the_page_limit_is_cut_with_truncated(
    shared_topics, shared_collector, site, shared_worker
):
    """Past `CRAWL_MAX_PDF_PAGES` (default 100) the text stops; `page_count` is the
    document's own."""
    pages = DEFAULT_MAX_PDF_PAGES + 5
    url = site.url(f"/content/manual.pdf?pages={pages}")
    messages = [_request(f"pdf-long-{p}", [url], render=p) for p in PATHS]
    results = await _crawl(shared_topics, shared_collector, messages)
    for path in PATHS:
        result = results[f"pdf-long-{path}"]
        assert result.ok
        assert result.truncated
        assert result.markdown == _pdf_markdown(pages, DEFAULT_MAX_PDF_PAGES)
        assert (result.document.page_count, result.document.pages_read) == (pages, 100)


async def test_the_pdf_format_prints_the_rendered_page(
    shared_topics, shared_collector, site, shared_worker
):
    """`formats: ["pdf"]` gives the page printed by Chromium, base64, as screenshots are."""
    url = site.url("/content/article")
    results = await _crawl(
        shared_topics, shared_collector, [_request("print", [url], formats=("pdf", "text"))]
    )
    printed = base64.b64decode(results["print"].pdf)
    assert printed.startswith(b"%PDF-")
    document = pdfium.PdfDocument(printed)
    try:
        text = " ".join(page.get_textpage().get_text_range() for page in document)
    finally:
        document.close()
    assert ARTICLE_WORDS in " ".join(text.split())


async def test_a_challenge_page_is_blocked_by_site_and_retried_like_a_429(
    shared_topics, shared_collector, site, shared_worker
):
    """A 503 "Just a moment..." page with Cloudflare's challenge script is not `ok` on any
    path: `blocked_by_site`, saying what was seen, after the retries a 429 gets."""
    messages = [
        _request(f"challenge-{p}", [site.url(f"/content/challenge/{p}")], render=p)
        for p in (*PATHS, "auto")
    ]
    results = await _crawl(shared_topics, shared_collector, messages)
    for path in (*PATHS, "auto"):
        result = results[f"challenge-{path}"]
        assert not result.ok
        assert result.status_code == 503
        assert result.error.code == ErrorCode.BLOCKED_BY_SITE, (path, result.error)
        assert result.error.message.startswith("HTTP 503: Cloudflare challenge (title")
        assert "/cdn-cgi/challenge-platform/" in result.error.message
    default_retries = 2
    assert site.hits["/content/challenge/browser"] == 1 + default_retries
    assert site.hits["/content/challenge/http"] == 1 + default_retries


async def test_a_selector_that_does_not_parse_is_rejected_at_intake(
    shared_topics, shared_collector, site, shared_worker
):
    """The request is rejected with `invalid_selector` naming the selector; none of its
    pages is fetched."""
    value = json.dumps(
        {
            "request_id": "bad-selector",
            "urls": [site.url("/content/never-fetched")],
            "options": {"include_tags": ["article", "div >"]},
        }
    ).encode()
    await produce(shared_topics, [(b"bad-selector", value)])
    await shared_collector.wait_until(
        lambda seen: seen.terminal("bad-selector"), deadline_s=DEADLINE_S
    )
    [terminal] = shared_collector.seen.terminal("bad-selector")
    assert terminal.type == EventType.REJECTED
    assert terminal.detail.startswith("invalid_selector: ")
    assert "'div >' is not a CSS selector" in terminal.detail
    assert site.hits["/content/never-fetched"] == 0
