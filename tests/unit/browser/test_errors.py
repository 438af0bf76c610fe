"""Browser failures get the contract's codes; `internal` is left for what nothing explains."""

from __future__ import annotations

import pytest

from service.browser.failures import FailedNavigation, classify_message, classify_navigation
from service.contracts import ErrorCode
from service.egress.refusals import UPSTREAM_FAILED
from service.egress.verdict import proxy_refusal, proxy_verdict

SITE = "http://127.0.0.1:8080/moved"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        (f"Page.goto: net::ERR_UNSAFE_REDIRECT at {SITE}", ErrorCode.BLOCKED),
        (f"Page.goto: net::ERR_UNKNOWN_URL_SCHEME at {SITE}", ErrorCode.BLOCKED),
        (f"Page.goto: net::ERR_BLOCKED_BY_RESPONSE at {SITE}", ErrorCode.BLOCKED),
        (f"Page.goto: net::ERR_INVALID_REDIRECT at {SITE}", ErrorCode.INVALID_URL),
        ("Page.goto: Protocol error: Cannot navigate to invalid URL", ErrorCode.INVALID_URL),
        (f"Page.goto: net::ERR_CONNECTION_REFUSED at {SITE}", ErrorCode.CONNECTION),
        (f"Page.goto: net::ERR_HTTP2_PROTOCOL_ERROR at {SITE}", ErrorCode.CONNECTION),
        (f"Page.goto: net::ERR_CONTENT_LENGTH_MISMATCH at {SITE}", ErrorCode.CONNECTION),
        (f"Page.goto: net::ERR_NAME_NOT_RESOLVED at {SITE}", ErrorCode.DNS),
        ("Page.goto: Download is starting", ErrorCode.DOWNLOAD),
        ("Page.content: Target crashed", ErrorCode.BROWSER_CRASH),
        ("Page.content: TypeError: undefined is not a function", ErrorCode.INTERNAL),
    ],
)
def test_messages_map_to_codes(message, code):
    """Every network error Chromium reports is about the target, never `internal`."""
    assert classify_message(message) == code


@pytest.mark.parametrize(
    ("failure", "code", "says"),
    [
        (
            FailedNavigation(error="net::ERR_UNSAFE_REDIRECT", url=SITE),
            ErrorCode.BLOCKED,
            "not http(s)",
        ),
        (
            FailedNavigation(error="net::ERR_ABORTED", url="ftp://files.example/"),
            ErrorCode.BLOCKED,
            "redirect to ftp:",
        ),
        (
            FailedNavigation(error="net::ERR_ABORTED", url=SITE),
            ErrorCode.BLOCKED,
            "javascript:",
        ),
        (
            FailedNavigation(
                error="net::ERR_TUNNEL_CONNECTION_FAILED",
                url="https://127.0.0.2:8443/",
                refused="loopback",
            ),
            ErrorCode.BLOCKED,
            "refused by the URL policy (loopback)",
        ),
        (
            FailedNavigation(
                error="net::ERR_TUNNEL_CONNECTION_FAILED", url="https://down.example/"
            ),
            ErrorCode.CONNECTION,
            "ERR_TUNNEL_CONNECTION_FAILED at https://down.example/",
        ),
        (
            FailedNavigation(
                error=f"Page.goto: net::ERR_TOO_MANY_REDIRECTS at {SITE}", url=SITE, status=302
            ),
            ErrorCode.HTTP_ERROR,
            f"net::ERR_TOO_MANY_REDIRECTS at {SITE}",
        ),
        (
            FailedNavigation(error="net::ERR_ABORTED", url=SITE, status=200),
            ErrorCode.DOWNLOAD,
            "download",
        ),
        (
            FailedNavigation(error="net::ERR_SOMETHING_NEW", url=SITE),
            ErrorCode.CONNECTION,
            "ERR_SOMETHING_NEW",
        ),
    ],
)
def test_failed_navigations_say_why(failure, code, says):
    """Redirects to other schemes and proxy refusals are `blocked`; a tunnel that failed for
    any other reason stays `connection`."""
    got, message = classify_navigation(failure)
    assert got == code
    assert says in message


def test_an_answer_without_a_page_is_told_apart():
    """A 204 or a download answered the navigation; an abort without an answer did not."""
    assert FailedNavigation(error="net::ERR_ABORTED", url=SITE, status=204).answered_without_page
    assert not FailedNavigation(error="net::ERR_ABORTED", url=SITE).answered_without_page
    assert not FailedNavigation(
        error="net::ERR_TUNNEL_CONNECTION_FAILED", url=SITE, status=302
    ).answered_without_page


@pytest.mark.parametrize("status", [200, 204, None])
def test_an_aborted_navigation_of_a_killed_renderer_is_a_browser_crash(status):
    """Issue 19: a renderer the OOM killer took aborts the navigation as a download (an answer
    came) or as an abandoned redirect (none came) does; it is `browser_crash`, not a 204."""
    failure = FailedNavigation(
        error="net::ERR_ABORTED", url=SITE, status=status, renderer_died=True
    )
    assert not failure.answered_without_page
    code, message = classify_navigation(failure)
    assert code == ErrorCode.BROWSER_CRASH
    assert "renderer died" in message


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (f"Page.goto: net::ERR_INVALID_AUTH_CREDENTIALS at {SITE}", 401),
        (f"Page.goto: net::ERR_UNEXPECTED_PROXY_AUTH at {SITE}", 407),
    ],
)
def test_a_challenge_the_browser_cannot_answer_is_an_http_error(error, status):
    """A 401 with `WWW-Authenticate: Basic` ends with ERR_INVALID_AUTH_CREDENTIALS in
    Chromium (no login to give): the site answered, so it is `http_error` with its status,
    never `connection` (which would be retried)."""
    failure = FailedNavigation(error=error, url=SITE, status=status)
    assert failure.challenged
    code, message = classify_navigation(failure)
    assert code == ErrorCode.HTTP_ERROR
    assert f"HTTP {status}" in message


def test_an_auth_error_without_an_answer_is_not_a_challenge():
    """Without a status nothing was answered: the error stays a network error."""
    failure = FailedNavigation(error="net::ERR_INVALID_AUTH_CREDENTIALS", url=SITE)
    assert not failure.challenged
    assert classify_navigation(failure)[0] == ErrorCode.CONNECTION


@pytest.mark.parametrize(
    ("url", "status", "headers"),
    [
        ("http://site.example/", 200, {"x-crawlstream-blocked": "loopback"}),
        ("http://site.example/", 200, {"x-crawlstream-error": "connection"}),
        ("http://site.example/", 502, {"x-crawlstream-blocked": "loopback"}),
        ("http://site.example/", 403, {"x-crawlstream-error": "dns"}),
        ("https://site.example/", 403, {"x-crawlstream-blocked": "loopback"}),
        ("https://site.example/", 502, {"x-crawlstream-error": "timeout"}),
    ],
)
def test_a_verdict_header_counts_only_on_an_answer_the_proxy_gives(url, status, headers):
    """A site that sends the proxy's headers on its own status, or inside an https tunnel
    (where only the site answers), gets no verdict from them."""
    assert proxy_refusal(url, status, headers) is None


def test_the_proxys_own_answers_are_verdicts():
    blocked = proxy_refusal("http://a.example/", 403, {"x-crawlstream-blocked": "loopback"})
    failed = proxy_refusal("http://a.example/", 502, {"x-crawlstream-error": "dns"})
    tunnel = proxy_verdict("https://a.example/", 403, {"x-crawlstream-blocked": "private"})
    assert [r.error.code if r and r.error else None for r in (blocked, failed, tunnel)] == [
        ErrorCode.BLOCKED,
        ErrorCode.DNS,
        ErrorCode.BLOCKED,
    ]


def test_a_tunnel_the_upstream_proxy_failed_is_proxy_error_not_blocked():
    """The egress proxy reports an upstream's failure on a CONNECT like a refusal, marked:
    the browser's tunnel failure then says `proxy_error` and what the proxy did."""
    failure = FailedNavigation(
        error="net::ERR_TUNNEL_CONNECTION_FAILED",
        url="https://shop.example/",
        refused=f"{UPSTREAM_FAILED}proxy office rejected its credentials (407)",
    )
    assert classify_navigation(failure) == (
        ErrorCode.PROXY_ERROR,
        "https://shop.example/: proxy office rejected its credentials (407)",
    )
