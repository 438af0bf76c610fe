"""The test support's URL normalisation follows the deep-crawl contract's rules."""

from __future__ import annotations

import pytest
from _urlnorm import normalise, resolve


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("HTTP://Example.COM/a", "http://example.com/a"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a", "http://example.com:8080/a"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://example.com/p/%37", "http://example.com/p/7"),
        ("http://example.com/a%2fb%7E", "http://example.com/a%2Fb~"),
        ("http://example.com/index.html", "http://example.com/index.html"),
        ("http://example.com/p?b=2&a=1&a=1", "http://example.com/p?b=2&a=1&a=1"),
    ],
)
def test_normalise(raw, normal):
    """Scheme and host lower-cased, default port and fragment dropped, unreserved escapes
    decoded, the path otherwise and the query kept as written."""
    assert normalise(raw) == normal


def test_ignore_query_drops_the_query():
    """With ignore_query the query goes, whatever its order."""
    assert normalise("http://h/p?b=2&a=1#x", ignore_query=True) == "http://h/p"


def test_resolve_relative_hrefs():
    """Relative hrefs resolve against the page's base URL before normalisation."""
    assert resolve("http://h/docs/a/", "../../p/3") == "http://h/p/3"
    assert resolve("http://h/calendar?month=0", "?month=1") == "http://h/calendar?month=1"
    assert resolve("http://h/p/1", "#top") == "http://h/p/1"
