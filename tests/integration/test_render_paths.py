"""`render: http` and `auto` against the real broker, worker, egress proxy and Chromium.

Tests with default settings share one worker (`run`) and tell their work apart by request
id; a test that configures its worker starts its own."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from harness import produce
from testsite import JS_KINDS, hit_counter, marker

from service.contracts import CrawlOptions, CrawlRequest, CrawlSpec, EventType, dump

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from conftest import SharedRun
    from testsite import TestSite

pytestmark = pytest.mark.integration

DEADLINE_S = 300.0
"""Generous: two shared cores, one worker, a few dozen pages."""

MARKDOWN_SIMILARITY = 0.98
"""Least similarity of the HTTP path's Markdown to the browser's for the same static page
(the browser extracts its serialised DOM, the HTTP path the bytes the server sent)."""

FORMATS = ("markdown", "links", "metadata", "text")


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest.model_validate(
        {"request_id": request_id, "urls": urls, "options": CrawlOptions(**options)},
        context={"lenient_schemes": True},
    )
    return request_id.encode(), dump(request)


async def _crawl(topics, collector, messages: list[tuple[bytes, bytes]]) -> None:
    await produce(topics, messages)
    ids = [key.decode() for key, _ in messages]
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in ids), deadline_s=DEADLINE_S
    )
    for rid in ids:
        [terminal] = collector.seen.terminal(rid)
        assert terminal.type == EventType.COMPLETED, (rid, terminal)


def _similarity(a: str | None, b: str | None) -> float:
    """difflib's ratio of the two texts. Equal texts are 1.0 without running it: on a 50 kB
    page `SequenceMatcher(autojunk=False)` spends some 20 s of CPU to say so."""
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _by_url(collector, request_id: str) -> dict[str, object]:
    return {result.url: result for result in collector.seen.results_of(request_id)}


@pytest.fixture
async def run(
    shared_worker_with: Callable[..., Awaitable[SharedRun]],
    site: TestSite,
    other_site: TestSite,
) -> SharedRun:
    """The module's default worker, on topics and a group of its own, with both sites of the
    module allowlisted (no test here needs either left out). What `auto` learns is kept per
    host name, so the host the learning test teaches (127.0.0.2) is one no other test of the
    worker crawls (their `auto` pages on 127.0.0.1 keep probing HTTP first)."""
    hosts = f"127.0.0.1:{site.port},127.0.0.2:{other_site.port}"
    return await shared_worker_with(CRAWL_ALLOWED_HOSTS=hosts)


async def test_auto_gets_every_page_of_a_mixed_host_right(topics, collector, site, start_worker):
    """On one host, script-rendered pages (an app shell, a `<noscript>` page, boilerplate
    around an empty `<main>`, a script-filled widget) come from the browser with their
    content; static pages (articles, a long story with an analytics script, plain text) come
    from HTTP; `wait_for` absent from the static HTML and a screenshot go to the browser.
    Learning is off here so each page's own verdict shows."""
    await start_worker(CRAWL_RENDER_LEARN_AFTER="0")
    js = [site.url(f"/app/{kind}/{n}") for kind in JS_KINDS for n in (1, 2)]
    static = [site.url(f"/page/{n}") for n in (21, 22, 23)]
    static += [site.url(f"/app/static/{n}") for n in (1, 2)] + [site.url("/text/plain")]
    late = site.url("/js/late?n=31&delay_ms=50")
    await _crawl(
        topics,
        collector,
        [
            _request("auto-mix", [*js, *static], render="auto", formats=FORMATS),
            _request("auto-wait", [late], render="auto", wait_for="#late"),
            _request("auto-shot", [static[0]], render="auto", formats=("screenshot",)),
        ],
    )
    results = _by_url(collector, "auto-mix")
    for url in js:
        result = results[url]
        kind, n = url.rsplit("/", 2)[-2:]
        assert (result.ok, result.rendered_by) == (True, "browser"), url
        assert marker(kind, int(n)) in (result.markdown or ""), url
    for url in static:
        result = results[url]
        assert (result.ok, result.rendered_by) == (True, "http"), (url, result.error)
        assert result.markdown, url
    [waited] = collector.seen.results_of("auto-wait")
    assert (waited.ok, waited.rendered_by) == (True, "browser")
    assert "Late content 31" in (waited.markdown or "")
    [shot] = collector.seen.results_of("auto-shot")
    assert (shot.ok, shot.rendered_by, bool(shot.screenshot)) == (True, "browser", True)


async def test_auto_sends_a_host_straight_to_the_browser_once_it_learned(run, other_site):
    """After the host's pages needed the browser 3 times in a row, its next pages (static
    ones too) skip HTTP: they come from the browser, still right."""
    topics, collector, site = run.topics, run.collector, other_site
    shells = [site.url(f"/app/shell/{n}") for n in range(40, 46)]
    await _crawl(topics, collector, [_request("learn-1", shells, render="auto")])
    assert {r.rendered_by for r in collector.seen.results_of("learn-1")} == {"browser"}
    static = [site.url(f"/page/{n}") for n in (41, 42)]
    await _crawl(topics, collector, [_request("learn-2", static, render="auto")])
    for result in collector.seen.results_of("learn-2"):
        assert (result.ok, result.rendered_by) == (True, "browser"), result.url
        assert result.title == f"Page {result.url.rsplit('/', 1)[1]}"


async def test_http_gives_the_browsers_extraction_on_static_pages(run, site):
    """The same static pages through both paths: equal title, links and metadata, and
    Markdown and text at least 98% alike; `rendered_by` names the path."""
    shared_topics, shared_collector = run.topics, run.collector
    urls = [site.url(path) for path in ("/page/5", "/page/77", "/app/static/3", "/")]
    await _crawl(
        shared_topics,
        shared_collector,
        [
            _request("same-http", urls, render="http", formats=FORMATS),
            _request("same-browser", urls, render="browser", formats=FORMATS),
        ],
    )
    by_http, by_browser = (
        _by_url(shared_collector, "same-http"),
        _by_url(shared_collector, "same-browser"),
    )
    for url in urls:
        http, browser = by_http[url], by_browser[url]
        assert (http.ok, http.rendered_by, browser.rendered_by) == (True, "http", "browser")
        assert (http.status_code, http.final_url) == (browser.status_code, browser.final_url)
        assert http.title == browser.title, url
        assert http.links == browser.links, url
        assert http.metadata == browser.metadata, url
        for field in ("markdown", "text"):
            ratio = _similarity(getattr(http, field), getattr(browser, field))
            assert ratio >= MARKDOWN_SIMILARITY, (url, field, ratio)


async def test_the_url_policy_holds_on_the_http_path(run, site):
    """Private and numeric loopback spellings, metadata and private addresses, a port that is
    not an egress port, other schemes, and redirects to a private http or https target or to
    `file:` are `blocked` with `render: http` and `auto`, as with the browser; the private
    server counts 0 hits."""
    shared_topics, shared_collector = run.topics, run.collector
    async with hit_counter() as private:
        port = private.port
        targets = {
            "loop": f"http://127.0.0.1:{port}/",
            "decimal": f"http://2130706433:{port}/",
            "hex": f"http://0x7f.1:{port}/",
            "octal": f"http://0177.0.0.1:{port}/",
            "mapped": f"http://[::ffff:127.0.0.1]:{port}/",
            "localhost": f"http://localhost:{port}/",
            "metadata": "http://169.254.169.254/latest/meta-data/",
            "private": "http://10.0.0.1/",
            "port": "http://93.184.216.34:8080/",
            "file": "file:///etc/passwd",
            "redirect": site.url(f"/hostile/private-redirect?target={private.url}/x"),
            "redirect-https": site.url(
                "/hostile/private-redirect?target=" + quote(f"https://127.0.0.1:{port}/x", safe="")
            ),
            "redirect-file": site.url("/nav/redirect/c?to=" + quote("file:///etc/passwd")),
        }
        messages = [
            _request(f"{mode}-{name}", [url], render=mode)
            for mode in ("http", "auto")
            for name, url in targets.items()
        ]
        embed = site.url(f"/hostile/private-embed?target={private.url}/e")
        messages.append(_request("http-embed", [embed], render="http"))
        await _crawl(shared_topics, shared_collector, messages)
        for key, _ in messages[:-1]:
            [result] = shared_collector.seen.results_of(key.decode())
            assert result.error is not None, key
            assert result.error.code.value == "blocked", (key, result.error)
        [embedded] = shared_collector.seen.results_of("http-embed")
        assert (embedded.status_code, embedded.rendered_by) == (200, "http")
        assert private.hits == 0


async def test_http_says_what_it_cannot_do(topics, collector, site, start_worker):
    """`render: http` runs no scripts: an absent `wait_for` is `timeout`, a non-CSS one
    `invalid_selector`, a PDF `download`, an oversized page is cut with `truncated`, a
    503 is retried and then ok, a robots.txt refusal is `robots` without `rendered_by`."""
    await start_worker(CRAWL_MAX_RESULT_BYTES="200000")
    cases = {
        "h-wait": (["/js/late?n=1"], {"wait_for": "#late"}),
        "h-xpath": (["/page/1"], {"wait_for": "xpath=//h1"}),
        "h-pdf": (["/binary/pdf"], {}),
        "h-large": (["/large?kb=600"], {"formats": ("html",)}),
        "h-flaky": (["/flaky/http-path?fail=1"], {}),
        "h-robots": (["/private/x"], {"respect_robots": True}),
    }
    messages = [
        _request(rid, [site.url(path) for path in paths], render="http", **options)
        for rid, (paths, options) in cases.items()
    ]
    await _crawl(topics, collector, messages)
    codes = {}
    for rid in cases:
        [result] = collector.seen.results_of(rid)
        codes[rid] = (result.error.code.value if result.error else "ok", result.rendered_by)
    assert codes == {
        "h-wait": ("timeout", "http"),
        "h-xpath": ("invalid_selector", "http"),
        "h-pdf": ("download", "http"),
        "h-large": ("ok", "http"),
        "h-flaky": ("ok", "http"),
        "h-robots": ("robots", None),
    }
    [large] = collector.seen.results_of("h-large")
    assert large.truncated
    assert len((large.html or "").encode()) <= 200_000


async def test_a_deep_crawl_with_http_follows_links(run, site):
    """A deep crawl of the test site with `render: http` admits the seed's links and renders
    every page over HTTP."""
    shared_topics, shared_collector = run.topics, run.collector
    request = CrawlRequest(
        request_id="deep-http",
        urls=[site.url("/page/900")],
        options=CrawlOptions(render="http"),
        crawl=CrawlSpec(max_depth=1, max_pages=12),
    )
    await _crawl(shared_topics, shared_collector, [(b"deep-http", dump(request))])
    results = shared_collector.seen.results_of("deep-http")
    assert len(results) == 12
    assert {(r.ok, r.rendered_by) for r in results} == {(True, "http")}
    assert {r.depth for r in results} == {0, 1}
    assert all(r.parent_url == site.url("/page/900") for r in results if r.depth == 1)
