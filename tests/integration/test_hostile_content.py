"""Hostile content and input: work a page makes the worker do (a backtracking selector, a
PDF bomb, a huge `extract` or script value) ends that page alone with a clear code while
other requests on the worker answer; input that cannot work is refused at intake; a
request's headers reach only the page's own origin, also on its scripts' requests; `data:`
content never becomes a result."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from _bombs import BOMB_SELECTOR, DATA_MARKER
from _scriptrequests import LONG_POLL, WAYS, answered, said
from harness import produce, read_topic
from testsite import serve
from waiting import until

from service.contracts import CrawlRequest, EventType

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from conftest import SharedRun
    from testsite import TestSite

pytestmark = pytest.mark.integration

MAX_RESULT_BYTES = 20_000_000
"""`CRAWL_MAX_RESULT_BYTES` by default."""

ENVELOPE_BYTES = 64 * 1024
"""What a result's JSON may hold beyond its bounded fields (ids, URLs, metadata, escapes)."""


@pytest.fixture(scope="module")
async def same_site() -> AsyncIterator[TestSite]:
    """Another port of the test site's host (its site, another origin)."""
    async with serve("127.0.0.1") as running:
        yield running


def _fresh(site: TestSite) -> TestSite:
    """`site` with what it counted for earlier tests of the module forgotten."""
    for counted in (site.hits, site.authorized, site.held):
        counted.clear()
    return site


@pytest.fixture
def same(same_site: TestSite) -> TestSite:
    return _fresh(same_site)


@pytest.fixture
def other(other_site: TestSite) -> TestSite:
    return _fresh(other_site)


@pytest.fixture
async def run(
    shared_worker_with: Callable[..., Awaitable[SharedRun]],
    site: TestSite,
    same_site: TestSite,
    other_site: TestSite,
) -> SharedRun:
    """The module's one worker, on topics and a group of its own, with every site of the
    module allowlisted (no test here needs a host left out): each test tells its work apart
    by request id."""
    hosts = f"127.0.0.1:{site.port},127.0.0.1:{same_site.port},127.0.0.2:{other_site.port}"
    return await shared_worker_with(CRAWL_ALLOWED_HOSTS=hosts)


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    """A request as a producer writes it: only the options it names."""
    body = {"request_id": request_id, "urls": urls, "options": options}
    CrawlRequest.model_validate(body)
    return request_id.encode(), json.dumps(body).encode()


def _raw(request_id: str, url: str, options: dict[str, object]) -> tuple[bytes, bytes]:
    """A request as a producer may write it, `Infinity` and `NaN` included."""
    body = {"request_id": request_id, "urls": [url], "options": options}
    return request_id.encode(), json.dumps(body).encode()


async def _bomb_then_canary(topics, collector, site, bomb, canary, path):
    """Produce `bomb`, wait until the site served its page (its content work begins), then
    produce `canary`; the canary's run must end while the bomb's page has no result yet."""
    await produce(topics, [bomb])
    await until(lambda: site.hits[path] >= 1, deadline_s=60)
    await produce(topics, [canary])
    canary_id, bomb_id = canary[0].decode(), bomb[0].decode()
    await collector.wait_until(lambda seen: seen.terminal(canary_id), deadline_s=60)
    [answered] = collector.seen.results_of(canary_id)
    assert answered.ok, answered.error
    assert collector.seen.results_of(bomb_id) == [], "the canary waited for the bomb"
    await collector.wait_until(lambda seen: seen.terminal(bomb_id), deadline_s=120)
    [result] = collector.seen.results_of(bomb_id)
    assert len(result.model_dump_json()) <= MAX_RESULT_BYTES + ENVELOPE_BYTES
    return result


async def test_a_backtracking_selector_ends_its_page_and_the_worker_answers_meanwhile(run, site):
    """`include_tags` with a selector that backtracks exponentially over 80 nested `div`s
    ends that page `too_large` at the content budget; a 1-URL request produced while it
    runs completes first, and a request after it completes too."""
    site.hits.clear()
    topics, collector = run.topics, run.collector
    path = "/bombs/nested-divs"
    bomb = _request("sel-bomb", [site.url(path)], include_tags=[BOMB_SELECTOR])
    canary = _request("sel-canary", [site.url("/page/1")])
    result = await _bomb_then_canary(topics, collector, site, bomb, canary, path)
    assert result.error is not None
    assert result.error.code.value == "too_large"
    assert "budget" in result.error.message
    await produce(topics, [_request("sel-after", [site.url("/page/2")])])
    await collector.wait_until(lambda seen: seen.terminal("sel-after"), deadline_s=60)
    [after] = collector.seen.results_of("sel-after")
    assert after.ok


async def test_a_pdf_bomb_is_read_within_bounds_beside_another_pdf(run, site):
    """An 18 KB PDF whose 100 pages share one stream of 1,000,000 characters is read only
    as far as the result's size allows (or ends `too_large`), and a 3-page PDF produced
    while it is read completes first."""
    site.hits.clear()
    topics, collector = run.topics, run.collector
    path = "/bombs/pdf"
    bomb = _request("pdf-bomb", [site.url(path)])
    canary = _request("pdf-canary", [site.url("/content/manual.pdf?pages=3")])
    result = await _bomb_then_canary(topics, collector, site, bomb, canary, path)
    if result.ok:
        assert result.truncated
        assert result.document is not None
        assert result.document.pages_read < result.document.page_count
    else:
        assert result.error is not None
        assert result.error.code.value == "too_large"


async def test_a_result_is_bounded_as_a_whole(run, site):
    """An `extract` that copies a 210 KB page 10,000 times and two script values of 12 MB
    each end `too_large` naming the field, within `CRAWL_MAX_RESULT_BYTES`; a page whose
    text fields together pass the cap is cut to it and marked `truncated`. The three pages
    share one worker: the two heavy ones get 60 s (a 30 s page timed out on a loaded
    machine), the size cap is what is tested."""
    topics, collector = run.topics, run.collector
    big_value = "() => 'x'.repeat(12 * 1024 * 1024)"
    requests = [
        _request(
            "big-extract",
            [site.url("/bombs/many-divs?blocks=10")],
            extract={"base_selector": "div", "fields": [{"name": "t", "type": "text"}]},
        ),
        _request(
            "big-script",
            [site.url("/page/1")],
            render="browser",
            timeout_ms=60_000,  # two 12 MB values cross the DevTools protocol
            actions=[
                {"type": "execute_javascript", "script": big_value},
                {"type": "execute_javascript", "script": big_value},
            ],
        ),
        _request(
            "big-text",
            [site.url("/large?kb=9000")],  # about 25 MB in three fields, over the 20 MB cap
            formats=["markdown", "text", "html"],
            timeout_ms=60_000,  # 9 MB rendered and read beside the two pages above
        ),
    ]
    await produce(topics, requests)
    ids = [key.decode() for key, _ in requests]
    await collector.wait_until(lambda seen: all(seen.terminal(i) for i in ids), deadline_s=240)
    for request_id, field in (("big-extract", "`json`"), ("big-script", "`actions`")):
        [result] = collector.seen.results_of(request_id)
        assert result.error is not None, request_id
        assert result.error.code.value == "too_large", result.error
        assert field in result.error.message
    [text] = collector.seen.results_of("big-text")
    assert text.ok, text.error
    assert text.truncated
    assert len(text.model_dump_json()) <= MAX_RESULT_BYTES + ENVELOPE_BYTES


async def test_input_that_cannot_work_is_rejected_naming_the_field(run, site):
    """`Infinity` or `NaN` in the geolocation or a cookie's `expires`, and time zones that
    Chromium refuses, are dead-lettered `invalid_request` with a `rejected` event naming the
    field; a page with JSON-LD nested 100,000 deep gives its structured data cut short."""
    topics, collector = run.topics, run.collector
    url = site.url("/page/1")
    cookie = {"name": "a", "value": "b", "url": url}
    bad = {
        "in-geo": (
            {"geolocation": {"latitude": 1, "longitude": 2, "accuracy": "inf"}},
            "geolocation.accuracy",
        ),
        "in-cookie": ({"cookies": [{**cookie, "expires": "nan"}]}, "cookies.0.expires"),
        "in-tz-right": ({"timezone": "right/UTC"}, "options.timezone"),
        "in-tz-local": ({"timezone": "localtime"}, "options.timezone"),
    }
    raw = [_raw(rid, url, options) for rid, (options, _) in bad.items()]
    raw = [(key, v.replace(b'"inf"', b"Infinity").replace(b'"nan"', b"NaN")) for key, v in raw]
    deep = _request("in-json-ld", [site.url("/bombs/deep-json-ld")], formats=["structured_data"])
    await produce(topics, [*raw, deep])
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in [*bad, "in-json-ld"]), deadline_s=120
    )
    letters = await read_topic(topics.bootstrap, topics.dead_letter, len(bad), 60)
    codes = {
        record.key.decode(): dict(record.headers)["crawlstream-error-code"].decode()
        for record in letters
    }
    for rid, (_, field) in bad.items():
        assert codes[rid] == "invalid_request", rid
        [rejected] = collector.seen.events_of(rid)
        assert rejected.type == EventType.REJECTED
        assert field in (rejected.detail or ""), rejected
    [structured] = collector.seen.results_of("in-json-ld")
    assert structured.ok, structured.error
    assert structured.structured_data is not None
    [thing] = structured.structured_data.json_ld
    assert thing["name"] == "deep"
    assert 0 < json.dumps(thing).count("[") <= 64


OWN_PAGES = {
    "image": "/bombs/third-party",
    "redirect": "/hostile/private-redirect",
    "image-redirect": "/bombs/redirected-image",
}
"""The page of each way a header could leave: an image on another host, a redirect of the
page to another site, an image of the page's own origin that redirects to another site."""


@pytest.mark.parametrize(
    ("render", "way"),
    [
        ("browser", "image"),
        ("browser", "redirect"),
        ("browser", "image-redirect"),
        ("http", "redirect"),
    ],
)
async def test_headers_reach_only_the_pages_own_origin(run, site, other, render, way):
    """A request's `Authorization` header reaches its page and the page's own image, not an
    image on another host nor a redirect's target on another site (of the page, or of an
    image of its own origin); with `headers_scope: all` it reaches the other host too (but for
    the image's cross-origin redirect, where Chromium itself drops it)."""
    topics, collector = run.topics, run.collector
    pixel = other.url("/bombs/pixel.png")
    own = OWN_PAGES[way]
    page = site.url(f"{own}?target={pixel}")
    hops_before = site.authorized["/hostile/private-redirect"]
    secret = {"Authorization": "Bearer caller-secret"}
    name = f"hd-{render}-{way}"
    scoped = _request(name, [page], render=render, headers=secret)
    await produce(topics, [scoped])
    await collector.wait_until(lambda seen: seen.terminal(name), deadline_s=120)
    [result] = collector.seen.results_of(name)
    assert other.hits["/bombs/pixel.png"] >= 1, result.error
    assert other.authorized["/bombs/pixel.png"] == 0
    widened = _request(
        f"{name}-all", [page + "&all"], render=render, headers=secret, headers_scope="all"
    )
    await produce(topics, [widened])
    await collector.wait_until(lambda seen: seen.terminal(f"{name}-all"), deadline_s=120)
    if way == "image-redirect":  # Chromium drops `Authorization` on a subresource's
        assert other.hits["/bombs/pixel.png"] >= 2  # cross-origin redirect (Fetch standard)
    else:
        assert other.authorized["/bombs/pixel.png"] >= 1
    for rid in (name, f"{name}-all"):
        [result] = collector.seen.results_of(rid)
        assert result.status_code == 200, (rid, result.error)
    assert site.authorized[own] >= 2
    if way != "redirect":
        assert site.authorized["/bombs/pixel.png"] >= 1
    if way == "image-redirect":  # the image's own-origin hop got them
        assert site.authorized["/hostile/private-redirect"] > hops_before


@pytest.mark.parametrize("render", ["browser", "http"])
async def test_headers_follow_a_pages_redirects_on_its_site(run, site, same, other, render):
    """A page that redirects within its origin, then to another port of its host (its site),
    then to another site: `Authorization` reaches each hop on its site, not the last one, and
    the page ends on the other site's URL."""
    topics, collector = run.topics, run.collector
    last = other.url("/page/1")
    on_port = same.url("/hostile/private-redirect?target=" + quote(last, safe=""))
    within = "/hostile/private-redirect?target=" + quote(on_port, safe="")
    page = site.url("/redirect?to=" + quote(within, safe=""))
    first_hops = site.authorized["/redirect"], site.authorized["/hostile/private-redirect"]
    rid = f"hd-hops-{render}"
    secret = {"Authorization": "Bearer caller-secret"}
    await produce(topics, [_request(rid, [page], render=render, headers=secret)])
    await collector.wait_until(lambda seen: seen.terminal(rid), deadline_s=120)
    [result] = collector.seen.results_of(rid)
    assert result.status_code == 200, result.error
    assert result.final_url == last
    hops = site.authorized["/redirect"], site.authorized["/hostile/private-redirect"]
    assert (hops[0] - first_hops[0], hops[1] - first_hops[1]) == (1, 1)
    assert same.authorized["/hostile/private-redirect"] == 1
    assert other.hits["/page/1"] >= 1
    assert other.authorized["/page/1"] == 0


SCRIPTED_PATHS = {
    "xhr-redirect": "/hostile/private-redirect",
    "fetch-redirect": "/hostile/private-redirect",
    "xhr-own": "/scripted/said",
    "event-stream": "/scripted/events",
}
"""The path of the page's origin that each way of `/scripted/ask` requests."""


async def _scripted(topics, collector, rid: str, page: str, way: str, scope: str) -> None:
    """Render `page` with an `Authorization` header in `scope`: the page shows the answer of
    its script's request."""
    options = {
        "headers": {"Authorization": "Bearer caller-secret"},
        "headers_scope": scope,
        "wait_for": "#answered",
    }
    await produce(topics, [_request(rid, [page], render="browser", **options)])
    await collector.wait_until(lambda seen: seen.terminal(rid), deadline_s=120)
    [result] = collector.seen.results_of(rid)
    assert result.status_code == 200, (rid, result.error)
    assert answered(way, said(way)) in (result.markdown or ""), (rid, result.markdown)


@pytest.mark.parametrize("way", WAYS)
async def test_headers_on_a_pages_script_requests(run, site, other, way):
    """An XHR or a `fetch()` of the page's origin carries a request's `Authorization` on its
    own hop, not to the other host it redirects to, and its answer still reaches the page; an
    XHR without a redirect carries it; an event stream of the page's origin carries none of
    it (the page still gets its event), but for `headers_scope: all`."""
    topics, collector = run.topics, run.collector
    target = other.url(f"/scripted/said?say={way}")
    page = site.url(f"/scripted/ask?way={way}&target={quote(target, safe='')}")
    own = SCRIPTED_PATHS[way]
    own_before = site.authorized[own]
    await _scripted(topics, collector, f"hs-{way}", page, way, "origin")
    if way == "event-stream":
        assert site.authorized[own] == own_before
        await _scripted(topics, collector, f"hs-{way}-all", page + "&all", way, "all")
    else:
        assert other.hits["/scripted/said"] == (0 if way == "xhr-own" else 1)
        assert other.authorized["/scripted/said"] == 0, "the other host got the header"
    assert site.authorized[own] > own_before


PAGE_TIMEOUT_S = 30
"""A page's `timeout_ms` by default, in seconds."""


async def test_a_long_poll_of_the_page_is_let_go_by_its_deadline(run, site):
    """A page whose XHR of its own origin is held by the server (a long poll) gives its
    result with the request's `headers`; the poll carried them, and its connection is let go
    by the page's deadline."""
    topics, collector = run.topics, run.collector
    arrived = site.held["arrived"]
    page = site.url(f"/scripted/ask?way={LONG_POLL}")
    secret = {"Authorization": "Bearer caller-secret"}
    await produce(topics, [_request("hs-long-poll", [page], render="browser", headers=secret)])
    await collector.wait_until(lambda seen: seen.terminal("hs-long-poll"), deadline_s=120)
    [result] = collector.seen.results_of("hs-long-poll")
    assert result.status_code == 200, result.error
    assert "asking" in (result.markdown or "")
    assert site.held["arrived"] == arrived + 1, "the poll was sent twice"
    assert site.authorized["/scripted/hold"] >= 1
    await until(lambda: site.held["ended"] == site.held["arrived"], deadline_s=PAGE_TIMEOUT_S)


async def test_content_of_a_data_url_never_reaches_a_result(run, site):
    """A page whose script navigates to a `data:` URL gives a result without that URL's
    content; one whose script takes it to `about:blank` ends `blocked` (no content of a
    scheme the URL policy does not allow)."""
    topics, collector = run.topics, run.collector
    pages = {
        **{f"data-{n}": f"/bombs/to-data-url?n={n}" for n in range(2)},
        **{f"blank-{n}": f"/bombs/to-about-blank?n={n}" for n in range(2)},
    }
    requests = [_request(rid, [site.url(path)], render="browser") for rid, path in pages.items()]
    await produce(topics, requests)
    await collector.wait_until(lambda seen: all(seen.terminal(i) for i in pages), deadline_s=120)
    for rid in pages:
        [result] = collector.seen.results_of(rid)
        assert DATA_MARKER not in result.model_dump_json(), rid
        if rid.startswith("blank") or not (result.final_url or "http").startswith("http"):
            assert result.error is not None, rid
            assert result.error.code.value == "blocked", (rid, result.error)
