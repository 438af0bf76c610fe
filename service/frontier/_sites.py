"""The host and the registrable domain ("site") of a normalised URL."""

from __future__ import annotations

from functools import cache
from ipaddress import ip_address
from urllib.parse import urlsplit

from publicsuffixlist import PublicSuffixList

from service.net.hosts import LOCALHOST


def host_of(url: str) -> str:
    """The host name of a normalised URL: lower-case ASCII, IPv6 without brackets."""
    return urlsplit(url).hostname or ""


def site_of(url: str) -> str:
    """The registrable domain of the URL's host by the Public Suffix List (`a.b.example.co.uk`
    -> `example.co.uk`, `me.github.io` stays itself); the host itself for IP addresses,
    `localhost` and its subdomains, and hosts that are a public suffix."""
    host = host_of(url)
    if _is_ip_address(host) or host == LOCALHOST or host.endswith("." + LOCALHOST):
        return host
    return _public_suffix_list().privatesuffix(host) or host


@cache
def _public_suffix_list() -> PublicSuffixList:
    """The list shipped with the `publicsuffixlist` package (ICANN and private sections)."""
    return PublicSuffixList()


def _is_ip_address(host: str) -> bool:
    try:
        ip_address(host)
    except ValueError:
        return False
    return True
