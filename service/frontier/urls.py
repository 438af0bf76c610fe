"""The dedupe form of a URL, and its 64-bit fingerprint.

Two links name the same page of a crawl when their normalised forms are equal. `normalise`
applies these rules, and applying it twice changes nothing:

- The URL is first read the way a browser reads it: spaces and control characters around it
  trimmed, tabs and newlines removed, backslashes before the query read as slashes.
- Only absolute `http` and `https` URLs with a host are kept; anything else gives None, and so
  does a URL longer than `MAX_URL_LENGTH` before or after normalising.
- The scheme is lower-cased.
- The host is read as a browser reads it: lower-cased, percent-escapes decoded, an IDN host in
  its IDNA (punycode) ASCII form, numeric IPv4 forms (`0x7f.1`) in dotted decimal, IPv6 in its
  compressed form in brackets, trailing dots dropped.
- The default port is dropped (80 for http, 443 for https); other ports are kept, without
  leading zeros.
- User information (`user:pass@`) is kept, with its percent-encoding normalised: dropping it
  would fetch a different page. An empty one (`http://@host/`) is dropped.
- The fragment is dropped.
- An empty path becomes `/`. Dot segments (`/a/./b/../c`, also spelled `%2E`) are resolved as
  RFC 3986 5.2.4 says. Nothing else changes the path: `/a/` and `/a/index.html` differ, and a
  trailing slash is neither added nor removed.
- Percent-encoding is normalised in the user information, path and query: escapes of
  unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded, other escapes are written in
  upper-case hex, and characters that may not stand in that component unescaped (space,
  non-ASCII characters as UTF-8, `"<>[]^{|}` and the like, a `%` not starting an escape) are
  escaped. `+` is left as it is: it means a space only to some servers.
- The query keeps its parameters in their order, duplicates included (`?b=2&a=1` differs from
  `?a=1&b=2`). An empty query (`/a?`) becomes no query. `ignore_query=True` drops the query.
"""

from __future__ import annotations

from hashlib import blake2b
from ipaddress import IPv6Address
from typing import Final
from urllib.parse import SplitResult, urlsplit

from service.contracts import ALLOWED_SCHEMES, MAX_URL_LENGTH
from service.frontier._rfc3986 import normalise_escapes, remove_dot_segments
from service.net.hosts import browser_cleaned_url, parse_host

DEFAULT_PORTS: Final = {"http": 80, "https": 443}
"""The port a scheme implies; a URL that names it explicitly is the same URL without it."""

FINGERPRINT_BYTES: Final = 8
"""blake2b digest size of a fingerprint: 64 bits, so one fits an `array('Q')` slot."""


def normalise(url: str, *, ignore_query: bool = False) -> str | None:
    """The dedupe form of the absolute URL `url` (rules in the module docstring); None when it
    is not an http(s) URL with a host, or is longer than `MAX_URL_LENGTH`."""
    if len(url) > MAX_URL_LENGTH:
        return None
    try:
        parts = urlsplit(browser_cleaned_url(url))
        if parts.scheme not in ALLOWED_SCHEMES:
            return None
        authority = _authority(parts)
        path = remove_dot_segments(normalise_escapes(parts.path, "path")) or "/"
        query = "" if ignore_query else normalise_escapes(parts.query, "query")
    except ValueError:
        return None
    normalised = f"{parts.scheme}://{authority}{path}" + (f"?{query}" if query else "")
    return normalised if len(normalised) <= MAX_URL_LENGTH else None


def fingerprint(normalised: str) -> int:
    """A non-zero 64-bit fingerprint of a normalised URL (blake2b of its UTF-8 bytes).

    A digest of zero, which marks an empty slot in a `SeenSet`, is read as 1.
    """
    digest = blake2b(normalised.encode("utf-8"), digest_size=FINGERPRINT_BYTES).digest()
    return int.from_bytes(digest, "big") or 1


def _authority(parts: SplitResult) -> str:
    """`userinfo@host:port`, normalised; ValueError when the host or the port is invalid."""
    userinfo, _, hostport = parts.netloc.rpartition("@")
    raw_host = parts.hostname
    if not raw_host:
        raise ValueError("no host")
    host = parse_host(f"[{raw_host}]" if hostport.startswith("[") else raw_host)
    name = host.name.rstrip(".")
    if not name:
        raise ValueError("empty host")
    if isinstance(host.address, IPv6Address):
        name = f"[{name}]"
    port = parts.port
    if port is not None and port != DEFAULT_PORTS[parts.scheme]:
        name = f"{name}:{port}"
    return f"{normalise_escapes(userinfo, 'userinfo')}@{name}" if userinfo else name
