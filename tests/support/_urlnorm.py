"""URL normalisation for the graph site and its reference crawl, written apart from the service's.

The rules are the deep-crawl contract's (issue 11): scheme and host lower-cased, default port
dropped, fragment dropped, percent-encoded unreserved characters decoded (other escapes
upper-cased), an empty path made `/`, query parameters kept as written and in order (or dropped
with `ignore_query`).
"""

from __future__ import annotations

import re
import string
from urllib.parse import urljoin, urlsplit, urlunsplit

__all__ = ["normalise", "origin_of", "resolve"]

UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
"""Characters RFC 3986 says mean the same escaped or not."""

DEFAULT_PORTS = {"http": 80, "https": 443}
"""Ports left out of a normalised URL."""

ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
"""One percent-encoded byte."""


def normalise(url: str, *, ignore_query: bool = False) -> str:
    """The normalised form of the absolute URL `url`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    port = parts.port
    netloc = host if port in {None, DEFAULT_PORTS.get(scheme)} else f"{host}:{port}"
    path = _decode_unreserved(parts.path) or "/"
    query = "" if ignore_query else _decode_unreserved(parts.query)
    return urlunsplit((scheme, netloc, path, query, ""))


def resolve(base: str, href: str) -> str:
    """The normalised absolute URL that `href` means on a page whose base URL is `base`."""
    return normalise(urljoin(base, href))


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a normalised URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _decode_unreserved(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in UNRESERVED else match.group(0).upper()

    return ESCAPE.sub(one, text)
