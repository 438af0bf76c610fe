"""Request identity and page actions (issue 21) against the real broker, worker, egress proxy
and Chromium, with default settings: headers, cookies and a user agent on both paths; locale,
time zone, geolocation, viewport, device and scripts off in the browser (and `auto` sending
such pages to it); contexts reused only between equal identities; page actions."""

from __future__ import annotations

import base64
import json

import pytest
from harness import produce

from service.contracts import CrawlOptions, CrawlRequest, ErrorCode, EventType, dump

pytestmark = pytest.mark.integration

DEADLINE_S = 240.0
"""Generous: two shared cores, one worker, a few pages per test."""

PATHS = ("browser", "http")

SEEN = "/identity/seen"

PNG = b"\x89PNG\r\n\x1a\n"


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


def _seen(result) -> dict[str, str]:
    """The `what=value` lines the page showed: the server's and its script's."""
    assert result.ok, result.error
    lines = (line.partition("=") for line in result.text.splitlines() if "=" in line)
    return {key: value for key, _, value in lines}


async def test_headers_cookies_and_user_agent_reach_the_site_on_both_paths(
    shared_topics, shared_collector, site, shared_worker
):
    """The server sees the request's extra header, its cookie (not the one for another path)
    and its user agent on both paths; the browser's scripts see the user agent and cookie."""
    options = {
        "formats": ("text",),
        "headers": {"X-Crawl-Test": "hello there", "Accept-Language": "fr"},
        "cookies": (
            {"name": "sid", "value": "abc123", "url": site.url("/")},
            {"name": "elsewhere", "value": "no", "domain": "127.0.0.1", "path": "/other"},
        ),
        "user_agent": "CrawlTest/2.0 (+identity)",
    }
    messages = [_request(f"id-http-{p}", [site.url(SEEN)], render=p, **options) for p in PATHS]
    messages += [
        _request(f"id-plain-{p}", [site.url(SEEN)], render=p, formats=("text",)) for p in PATHS
    ]
    results = await _crawl(shared_topics, shared_collector, messages)
    for path in PATHS:
        seen = _seen(results[f"id-http-{path}"])
        assert results[f"id-http-{path}"].rendered_by == path
        assert seen["header:x-crawl-test"] == "hello there", path
        assert seen["header:accept-language"] == "fr", path
        assert seen["header:user-agent"] == "CrawlTest/2.0 (+identity)", path
        assert seen["cookie:sid"] == "abc123", path
        assert "cookie:elsewhere" not in seen, path
        plain = _seen(results[f"id-plain-{path}"])
        assert "header:x-crawl-test" not in plain
        assert "cookie:sid" not in plain
        assert plain["header:user-agent"] != "CrawlTest/2.0 (+identity)"
    browser = _seen(results["id-http-browser"])
    assert browser["ua"] == "CrawlTest/2.0 (+identity)"
    assert browser["document-cookie"] == "sid=abc123"


async def test_locale_time_zone_geolocation_and_viewport_are_what_the_page_reads(
    shared_topics, shared_collector, site, shared_worker
):
    """In the browser (and under `auto`, which these options send to it) the page reads the
    request's language, time zone, window width and position; a request without them, run
    after on the same worker, gets none of them (its context is not the other's)."""
    url = site.url(f"{SEEN}?geo=1")
    options = {
        "formats": ("text",),
        "wait_for": "#done",
        "locale": "de-DE",
        "timezone": "Asia/Tokyo",
        "geolocation": {"latitude": 52.52, "longitude": 13.405},
        "viewport": {"width": 900, "height": 700},
    }
    first = await _crawl(
        shared_topics,
        shared_collector,
        [_request(f"id-browser-{p}", [url], render=p, **options) for p in ("browser", "auto")],
    )
    for path in ("browser", "auto"):
        result = first[f"id-browser-{path}"]
        assert result.rendered_by == "browser"
        seen = _seen(result)
        assert seen["language"] == "de-DE"
        assert seen["header:accept-language"].startswith("de-DE")
        assert seen["timezone"] == "Asia/Tokyo"
        assert seen["width"] == "900"
        assert seen["geo"] == "52.52,13.405"
    later = await _crawl(
        shared_topics,
        shared_collector,
        [
            _request("id-after", [url], formats=("text",), wait_for="#done"),
            _request("id-again", [url], **options),
        ],
    )
    plain = _seen(later["id-after"])
    assert plain["language"] == "en-US"
    assert plain["timezone"] != "Asia/Tokyo"
    assert plain["width"] == "1280"
    assert plain["geo"].startswith("error")  # no permission: not the other request's
    again = _seen(later["id-again"])
    assert (again["language"], again["width"], again["geo"]) == ("de-DE", "900", "52.52,13.405")


async def test_a_device_sets_viewport_user_agent_and_touch_and_scripts_can_be_off(
    shared_topics, shared_collector, site, shared_worker
):
    """`device: iPhone 15` gives its width, user agent and touch; `javascript: false` runs no
    script of the page (what the server echoed is still there)."""
    url = site.url(SEEN)
    results = await _crawl(
        shared_topics,
        shared_collector,
        [
            _request("id-device", [url], formats=("text",), device="iPhone 15"),
            _request("id-desktop", [url], formats=("text",)),
            _request("id-nojs", [url], formats=("text",), javascript=False, render="auto"),
        ],
    )
    phone, desktop = _seen(results["id-device"]), _seen(results["id-desktop"])
    assert phone["width"] == "393"
    assert "iPhone" in phone["ua"]
    assert phone["header:user-agent"] == phone["ua"]
    assert phone["touch"] == "true"
    assert desktop["touch"] == "false"
    assert "iPhone" not in desktop["ua"]
    off = results["id-nojs"]
    assert off.rendered_by == "browser"
    assert "header:host" in _seen(off)
    assert "ua" not in _seen(off)


async def test_bad_identity_options_are_rejected_at_intake_naming_the_problem(
    shared_topics, shared_collector, site, shared_worker
):
    """A hop-by-hop header, `Host` and an unknown device are `invalid_request`, each named
    (the device's with valid names); 51 actions too; no page is fetched."""
    bad = {
        "bad-conn": {"headers": {"Connection": "close"}},
        "bad-host": {"headers": {"Host": "example.com"}},
        "bad-proxy-header": {"headers": {"Proxy-Authorization": "Basic eA=="}},
        "bad-device": {"device": "Nokia 3310"},
        "bad-actions": {"actions": [{"type": "wait", "milliseconds": 1}] * 51},
    }
    messages = [
        (
            rid.encode(),
            json.dumps(
                {"request_id": rid, "urls": [site.url("/identity/never")], "options": options}
            ).encode(),
        )
        for rid, options in bad.items()
    ]
    await produce(shared_topics, messages)
    await shared_collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in bad), deadline_s=DEADLINE_S
    )
    details = {}
    for rid in bad:
        [terminal] = shared_collector.seen.terminal(rid)
        assert terminal.type == EventType.REJECTED, rid
        assert terminal.detail.startswith("invalid_request: "), terminal.detail
        details[rid] = terminal.detail
    assert "'Connection'" in details["bad-conn"]
    assert "'Host'" in details["bad-host"]
    assert "'Proxy-Authorization'" in details["bad-proxy-header"]
    assert "'Nokia 3310'" in details["bad-device"]
    assert "'iPhone 15'" in details["bad-device"]
    assert "at most 50" in details["bad-actions"]
    assert site.hits["/identity/never"] == 0


async def test_actions_click_load_more_fill_a_form_scroll_evaluate_and_screenshot(
    shared_topics, shared_collector, site, shared_worker
):
    """A click reveals the hidden part; a filled and submitted form gives its next page; an
    infinite scroll gives items 40-60, also when the page's main thread is busy for 1.5 s
    after each scroll; a script's value and a screenshot come back; `auto`
    runs actions in the browser."""
    results = await _crawl(
        shared_topics,
        shared_collector,
        [
            _request(
                "act-more",
                [site.url("/actions/load-more")],
                render="auto",
                formats=("text",),
                actions=(
                    {"type": "click", "selector": "#load"},
                    {"type": "wait", "selector": "#revealed"},
                    {"type": "execute_javascript", "script": "document.title + '!'"},
                    {"type": "execute_javascript", "script": "Promise.resolve({n: 2})"},
                    {"type": "screenshot"},
                ),
            ),
            _request("act-before", [site.url("/actions/load-more")], formats=("text",)),
            _request(
                "act-form",
                [site.url("/actions/form")],
                formats=("text",),
                actions=(
                    {"type": "write", "selector": "#q", "text": "blue kettle"},
                    {"type": "press", "key": "Enter"},
                    {"type": "wait", "milliseconds": 100},
                    {"type": "execute_javascript", "script": "location.pathname"},
                ),
            ),
            _request(
                "act-scroll",
                [site.url("/actions/scroll")],
                formats=("text",),
                actions=({"type": "scroll", "until_idle": True, "max_steps": 10},),
            ),
            _request("act-noscroll", [site.url("/actions/scroll")], formats=("text",)),
            _request(
                "act-scroll-busy",
                [site.url("/actions/scroll-busy")],
                formats=("text",),
                actions=({"type": "scroll", "until_idle": True, "max_steps": 10},),
            ),
        ],
    )
    more = results["act-more"]
    assert more.rendered_by == "browser"
    assert "Hidden second part" in more.text
    assert "Hidden second part" not in results["act-before"].text
    assert more.actions.returns == ["Load more!", {"n": 2}]
    [shot] = more.actions.screenshots
    assert base64.b64decode(shot).startswith(PNG)
    form = results["act-form"]
    assert form.ok, form.error.message
    assert form.final_url.startswith(site.url("/actions/answer?q=blue"))
    assert "Results for blue kettle" in form.text
    assert form.actions.returns == ["/actions/answer"]
    for scrolled in (results["act-scroll"].text, results["act-scroll-busy"].text):
        for number in (40, 50, 60):
            assert f"Feed item {number}" in scrolled
    assert "Feed item 40" not in results["act-noscroll"].text
    assert results["act-noscroll"].actions is None


async def test_a_failing_action_ends_the_page_with_action_failed_naming_the_step(
    shared_topics, shared_collector, site, shared_worker
):
    """A click on an element that never appears (step 2) and a script that throws (step 1)
    give `action_failed` with the step's number and the reason."""
    await produce(
        shared_topics,
        [
            _request(
                "act-missing",
                [site.url("/actions/load-more")],
                timeout_ms=8000,
                actions=(
                    {"type": "wait", "milliseconds": 10},
                    {"type": "click", "selector": "#no-such-button"},
                    {"type": "screenshot"},
                ),
            ),
            _request(
                "act-throws",
                [site.url("/actions/load-more")],
                actions=(
                    {
                        "type": "execute_javascript",
                        "script": "(() => { throw new Error('boom') })()",
                    },
                ),
            ),
        ],
    )
    ids = ("act-missing", "act-throws")
    await shared_collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in ids), deadline_s=DEADLINE_S
    )
    [missing] = shared_collector.seen.results_of("act-missing")
    [throws] = shared_collector.seen.results_of("act-throws")
    assert not missing.ok
    assert missing.error.code == ErrorCode.ACTION_FAILED
    assert missing.error.message.startswith("action 2 (click '#no-such-button'): ")
    assert "Timeout" in missing.error.message
    assert throws.error.code == ErrorCode.ACTION_FAILED
    assert throws.error.message.startswith("action 1 (execute_javascript): ")
    assert "boom" in throws.error.message
