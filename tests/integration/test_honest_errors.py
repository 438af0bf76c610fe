"""Ordinary pages get honest results: `internal` is for bugs, never for the web being the web."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from _navigating import FINAL_PATH, FINAL_TEXT, PUSHED_PATH, PUSHED_TEXT
from _proxyabuse import FORGED_TEXT
from harness import produce
from testsite import hit_counter

from service.contracts import CrawlOptions, CrawlRequest, EventType, dump

pytestmark = pytest.mark.integration

DEADLINE_S = 300
"""Generous: two shared cores, one worker, a few dozen pages."""

LONG_TITLE_CHARS = 1_000_000


def _request(request_id: str, url: str, **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=[url], options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


def _only_result(seen, request_id: str):
    """The one result of a one-URL request whose run completed."""
    [terminal] = seen.terminal(request_id)
    assert terminal.type == EventType.COMPLETED, request_id
    [result] = seen.results_of(request_id)
    return result


def _code(result) -> str:
    return result.error.code.value if result.error else "ok"


def _to(path: str, target: str, **query: str) -> str:
    return f"{path}?{urlencode({**query, 'to': target})}"


@dataclass(frozen=True, slots=True)
class Expect:
    """The result a page should get: ok, or `code`; for ok pages, where it ends and what it says."""

    code: str | None = None
    final_path: str | None = None
    text: str | None = None
    status: int | None = None


FINAL = Expect(final_path=FINAL_PATH, text=FINAL_TEXT)
OK = Expect()
BLOCKED = Expect(code="blocked")
BAD_SELECTOR = Expect(code="invalid_selector")

CORPUS: dict[str, tuple[str, dict[str, object], Expect]] = {
    "meta-refresh-0": ("/nav/meta-refresh/c?delay_s=0", {}, FINAL),
    "meta-refresh-2": ("/nav/meta-refresh/c?delay_s=2", {}, FINAL),
    "script-inline": ("/nav/script-redirect/c?when=inline", {}, FINAL),
    "script-on-load": ("/nav/script-redirect/c?when=load", {}, FINAL),
    "script-hops": ("/nav/hops/3", {}, Expect(final_path="/nav/hops/0", text=FINAL_TEXT)),
    "push-state": ("/nav/push-state", {}, Expect(final_path=PUSHED_PATH, text=PUSHED_TEXT)),
    "navigating-while-read": ("/nav/script-redirect/c?when=timer", {}, OK),
    "to-file": (_to("/nav/redirect/c", "file:///etc/passwd"), {}, BLOCKED),
    "to-data": (_to("/nav/redirect/c", "data:text/html,<h1>x</h1>"), {}, BLOCKED),
    "to-javascript": (_to("/nav/redirect/c", "javascript:alert(1)"), {}, BLOCKED),
    "to-ftp": (_to("/nav/redirect/c", "ftp://127.0.0.1/"), {}, BLOCKED),
    "to-view-source": (_to("/nav/redirect/c", "view-source:http://127.0.0.1/"), {}, BLOCKED),
    "selector-syntax": (FINAL_PATH, {"wait_for": "##$%^&*("}, BAD_SELECTOR),
    "selector-unclosed": (FINAL_PATH, {"wait_for": "div:has("}, BAD_SELECTOR),
    "selector-react": (FINAL_PATH, {"wait_for": "_react=Foo"}, BAD_SELECTOR),
    "selector-vue": (FINAL_PATH, {"wait_for": "_vue=Bar"}, BAD_SELECTOR),
    "selector-fine": (FINAL_PATH, {"wait_for": "#final"}, FINAL),
    "iframes": ("/nav/iframes", {}, Expect(final_path="/nav/iframes", text="Outer content")),
    "long-title": (f"/nav/long-title?chars={LONG_TITLE_CHARS}", {}, OK),
    "no-content": ("/status/204", {}, Expect(status=204)),
    "redirect-loop": ("/nav/hops/15", {}, Expect(code="http_error")),
}
"""Request ID suffix -> page, options, expected result."""


async def test_ordinary_pages_never_get_internal(
    shared_topics, shared_collector, site, shared_worker
):
    """Meta refresh, script redirects and pushState end ok on the final page; redirects to
    file:, data:, javascript: and other schemes are blocked; selectors the browser cannot
    evaluate are `invalid_selector`; iframes, a 1,000,000-character title, a 204 and a page
    navigating while it is read end ok; a client-side redirect loop is `http_error`. No page
    gets `internal`."""
    await produce(
        shared_topics,
        [_request(f"o-{name}", site.url(path), **opts) for name, (path, opts, _) in CORPUS.items()],
    )
    await shared_collector.wait_until(
        lambda seen: all(seen.terminal(f"o-{name}") for name in CORPUS), deadline_s=DEADLINE_S
    )
    results = {name: _only_result(shared_collector.seen, f"o-{name}") for name in CORPUS}
    outcomes = {name: _code(result) for name, result in results.items()}
    assert outcomes == {name: expect.code or "ok" for name, (_, _, expect) in CORPUS.items()}
    for name, (_, _, expect) in CORPUS.items():
        result = results[name]
        if expect.final_path is not None:
            assert result.final_url == site.url(expect.final_path), name
            assert result.status_code == 200, name
        if expect.text is not None:
            assert expect.text in (result.markdown or ""), name
        if expect.status is not None:
            assert result.status_code == expect.status, name
    [long_title] = shared_collector.seen.results_of("o-long-title")
    assert len(long_title.title or "") >= LONG_TITLE_CHARS - 1


async def test_blocked_https_navigations_are_blocked_and_tried_once(
    shared_topics, shared_collector, site, shared_worker
):
    """A server redirect, a meta refresh and a script navigation to a private https target
    (refused by the egress proxy at CONNECT, which Chromium reports as a tunnel failure) end
    `blocked`, not `connection`: the page is fetched once, never retried, and the private
    server receives nothing."""
    async with hit_counter("127.0.0.2") as private:
        target = f"https://127.0.0.2:{private.port}/"
        pages = {
            "https-redirect": _to("/nav/redirect/https-redirect", target),
            "https-meta-refresh": _to("/nav/meta-refresh/https-meta-refresh", target),
            "https-script": _to("/nav/script-redirect/https-script", target, when="load"),
        }
        requests = [_request(f"x-{name}", site.url(path)) for name, path in pages.items()]
        await produce(shared_topics, requests)
        await shared_collector.wait_until(
            lambda seen: all(seen.terminal(f"x-{name}") for name in pages), deadline_s=DEADLINE_S
        )
        results = {name: _only_result(shared_collector.seen, f"x-{name}") for name in pages}
        outcomes = {
            name: (_code(results[name]), site.hits[path.partition("?")[0]])
            for name, path in pages.items()
        }
        assert outcomes == dict.fromkeys(pages, ("blocked", 1))
        for result in results.values():
            assert "refused by the URL policy" in (result.error.message if result.error else "")
        urls = {site.url(path) for path in pages.values()}  # the worker serves other tests too
        retries = [
            e
            for e in shared_worker.events()
            if e.get("event") == "page.retrying" and e.get("url") in urls
        ]
        assert retries == []
        assert private.hits == 0


WITH_HEADERS = (
    "meta-refresh-0",
    "script-hops",
    "to-file",
    "to-data",
    "to-javascript",
    "iframes",
    "no-content",
    "redirect-loop",
)
"""Pages of `CORPUS` whose document or its redirects the browser fetches differently when a
request carries `headers` (one hop at a time, outside Chromium)."""


async def test_a_request_with_headers_gets_the_same_honest_results(
    shared_topics, shared_collector, site, shared_worker
):
    """With `headers` in the browser, pages that redirect (on the server, to other schemes,
    by script or meta refresh, in a loop), frame, or answer 204 end as without them; a
    server redirect within the site ends ok on its target; one to a private https target is
    `blocked` and the page is fetched once."""
    async with hit_counter("127.0.0.2") as private:
        pages = {name: CORPUS[name] for name in WITH_HEADERS}
        pages["server-redirect"] = (_to("/nav/redirect/h-server", FINAL_PATH), {}, FINAL)
        blocked = _to("/nav/redirect/h-https", f"https://127.0.0.2:{private.port}/")
        pages["https-redirect"] = (blocked, {}, BLOCKED)
        secret = {"X-Caller-Key": "k"}
        await produce(
            shared_topics,
            [
                _request(f"h-{name}", site.url(path), render="browser", headers=secret, **opts)
                for name, (path, opts, _) in pages.items()
            ],
        )
        await shared_collector.wait_until(
            lambda seen: all(seen.terminal(f"h-{name}") for name in pages), deadline_s=DEADLINE_S
        )
        results = {name: _only_result(shared_collector.seen, f"h-{name}") for name in pages}
        outcomes = {name: _code(result) for name, result in results.items()}
        assert outcomes == {name: expect.code or "ok" for name, (_, _, expect) in pages.items()}
        for name, (_, _, expect) in pages.items():
            if expect.final_path is not None:
                assert results[name].final_url == site.url(expect.final_path), name
            if expect.status is not None:
                assert results[name].status_code == expect.status, name
        assert site.hits["/nav/redirect/h-https"] == site.hits["/nav/redirect/h-server"] == 1
        assert private.hits == 0


FORGED: dict[str, tuple[str, int]] = {
    "blocked": ("/abuse/forged-blocked", 200),
    "dns": ("/abuse/forged-error/dns", 200),
    "connection": ("/abuse/forged-error/connection", 200),
    "timeout": ("/abuse/forged-error/timeout", 200),
    "blocked-403": ("/abuse/forged-blocked?status=403", 403),
    "connection-502": ("/abuse/forged-error/connection?status=502", 502),
}
"""Request ID suffix -> a page that sends the egress proxy's verdict headers itself, and its
own status."""


async def test_a_site_cannot_forge_the_egress_proxys_verdicts(
    topics, collector, site, start_worker
):
    """Pages that send `X-Crawlstream-Blocked` or `X-Crawlstream-Error` themselves get the
    result their status earns (ok with their content for a 200, `http_error` with the status
    for a 403 or 502), never `blocked`, `dns`, `connection` or `timeout`; each is fetched once;
    a 401 with a Basic challenge is `http_error` 401, fetched once."""
    worker = await start_worker()
    pages = {**FORGED, "basic-auth": ("/abuse/basic-auth", 401)}
    await produce(
        topics, [_request(f"f-{name}", site.url(path)) for name, (path, _) in pages.items()]
    )
    await collector.wait_until(
        lambda seen: all(seen.terminal(f"f-{name}") for name in pages), deadline_s=DEADLINE_S
    )
    results = {name: _only_result(collector.seen, f"f-{name}") for name in pages}
    outcomes = {name: (_code(result), result.status_code) for name, result in results.items()}
    assert outcomes == {
        name: ("ok" if status < 400 else "http_error", status)
        for name, (_, status) in pages.items()
    }
    for name in FORGED:
        assert FORGED_TEXT in (results[name].markdown or ""), name
    paths = Counter(path.partition("?")[0] for path, _ in pages.values())
    assert {path: site.hits[path] for path in paths} == paths  # each page fetched once
    assert [e for e in worker.events() if e.get("event") == "page.retrying"] == []
