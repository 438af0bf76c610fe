"""What makes a context's network stack remember something no wipe clears."""

from __future__ import annotations

import pytest

from service.browser.network_state import CREDENTIALS, header_taint, url_taint


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:s3cret@example.com/secret",
        "https://alice@example.com/",
        "http://:only-password@example.com/",
    ],
)
def test_a_url_with_a_user_or_password_taints_the_context(url: str) -> None:
    """The browser keeps such a credential in its auth cache and sends it unasked later."""
    assert url_taint(url) == CREDENTIALS


@pytest.mark.parametrize(
    "url", ["http://example.com/a@b", "https://example.com/?u=alice:s3cret@x", "about:blank"]
)
def test_a_url_without_credentials_does_not(url: str) -> None:
    """An `@` in the path or query is no credential."""
    assert url_taint(url) is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("accept-ch", "client_hints"),
        ("critical-ch", "client_hints"),
        ("strict-transport-security", "hsts"),
        ("nel", "reporting"),
        ("report-to", "reporting"),
        ("reporting-endpoints", "reporting"),
        ("use-as-dictionary", "dictionary"),
    ],
)
def test_a_response_header_the_network_stack_remembers_taints_the_context(
    name: str, reason: str
) -> None:
    assert header_taint({"content-type": "text/html", name: "x"}) == reason


def test_ordinary_response_headers_do_not() -> None:
    """Cookies and storage are what the wipe clears."""
    headers = {"content-type": "text/html", "cache-control": "max-age=60", "set-cookie": "a=1"}
    assert header_taint(headers) is None
