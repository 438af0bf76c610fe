"""The one host identity of a URL: the host a page counts against, and its registrable domain."""

from __future__ import annotations

import pytest

from service.net.hosts import host_key, site_of


def test_host_key_ignores_case_port_and_path():
    assert host_key("http://Example.COM:8080/a?b") == host_key("https://example.com/c")
    assert host_key("http://[::1]:80/") == "::1"


def test_host_key_is_lower_case():
    """Upper-case letters in a host never make a second host."""
    assert host_key("HTTP://WWW.Example.ORG/Path") == "www.example.org"


@pytest.mark.parametrize(
    ("url", "site"),
    [
        ("https://a.b.example.co.uk/x", "example.co.uk"),
        ("https://A.B.Example.CO.UK/x", "example.co.uk"),
        ("https://me.github.io/", "me.github.io"),
        ("http://127.0.0.1:8080/", "127.0.0.1"),
        ("http://[::1]/", "::1"),
        ("http://app.localhost/", "app.localhost"),
        ("http://co.uk/", "co.uk"),
    ],
)
def test_site_of_is_the_registrable_domain_in_lower_case(url, site):
    """The Public Suffix List's registrable domain; the host itself for IP addresses,
    localhost and public suffixes; the same for any case of the host."""
    assert site_of(url) == site
