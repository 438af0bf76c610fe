"""The HTTP path's headers, cookies and user agent for one hop."""

from __future__ import annotations

from service.contracts import CrawlOptions
from service.http.identity import HttpIdentity


def _identity(**options: object) -> HttpIdentity:
    return HttpIdentity.of(CrawlOptions(**options))


def test_cookies_go_where_a_browser_would_send_them() -> None:
    """Host-only cookies to their host, domain cookies to subdomains on their path, secure
    ones to https only, expired ones to nobody."""
    identity = _identity(
        cookies=[
            {"name": "host", "value": "1", "url": "https://shop.example/"},
            {"name": "dom", "value": "2", "domain": ".example", "path": "/a"},
            {"name": "sec", "value": "3", "domain": "example", "path": "/", "secure": True},
            {"name": "old", "value": "4", "domain": "example", "path": "/", "expires": 1.0},
        ]
    )
    assert identity.headers_for("https://shop.example/a/b")["Cookie"] == "host=1; dom=2; sec=3"
    assert "Cookie" not in identity.headers_for("http://www.example/ab")
    assert identity.headers_for("http://x.example/a")["Cookie"] == "dom=2"
    assert "Cookie" not in identity.headers_for("https://other.test/")


def test_the_user_agent_option_wins_and_a_cookie_header_is_extended() -> None:
    identity = _identity(
        headers={"user-agent": "mine", "Cookie": "a=b", "X-Y": "z"},
        user_agent="Agent/1",
        cookies=[{"name": "c", "value": "d", "url": "http://h.test/"}],
    )
    assert identity.headers_for("http://h.test/") == {
        "Cookie": "a=b; c=d",
        "X-Y": "z",
        "User-Agent": "Agent/1",
    }


def test_a_request_without_identity_sends_nothing_more() -> None:
    assert _identity().headers_for("http://h.test/") == {}


def test_certificates_are_verified_unless_the_request_skips_verification() -> None:
    assert HttpIdentity.of(CrawlOptions()).verify_tls
    assert not HttpIdentity.of(CrawlOptions(skip_tls_verification=True)).verify_tls
