"""Where a request's headers may go: the page's origin, its same-site navigation, or all."""

from __future__ import annotations

import pytest

from service.http.identity import HttpIdentity
from service.net.header_scope import sends_headers

PAGE = "https://shop.example.com/cart"


@pytest.mark.parametrize(
    ("url", "navigation", "sent"),
    [
        ("https://shop.example.com/img.png", False, True),
        ("https://shop.example.com:443/x", False, True),
        ("https://cdn.example.com/img.png", False, False),  # same site, another origin
        ("https://cdn.example.com/next", True, True),  # a same-site redirect of the page
        ("http://shop.example.com/x", False, False),  # another scheme
        ("http://shop.example.com/x", True, False),  # a downgrade is no same-site hop
        ("https://tracker.test/pixel", False, False),
        ("https://tracker.test/pixel", True, False),
        ("http://127.0.0.2:8080/pixel.png", False, False),
    ],
)
def test_headers_go_to_the_pages_origin_and_its_same_site_navigation(
    url: str, navigation: bool, sent: bool
) -> None:
    assert sends_headers("origin", PAGE, url, navigation=navigation) is sent


def test_scope_all_sends_headers_everywhere() -> None:
    assert sends_headers("all", PAGE, "https://tracker.test/pixel")


def test_the_http_path_drops_headers_on_a_redirect_to_another_site() -> None:
    """A hop to another site keeps the user agent and matching cookies, not the headers."""
    identity = HttpIdentity(
        headers=(("Authorization", "Bearer s"),),
        user_agent="UA",
        page_url="http://127.0.0.1:1/start",
    )
    assert identity.headers_for("http://127.0.0.1:1/next")["Authorization"] == "Bearer s"
    assert identity.headers_for("http://127.0.0.2:1/pixel") == {"User-Agent": "UA"}
