"""Where a request's own `headers` may go: the page's origin by default.

A caller's `Authorization` or API key is meant for the site it names, not for every host the
page loads an image, a script or a frame from. With `headers_scope: origin` (the default) a
request's headers go to URLs of the page's own origin (scheme, host and port), and to the
page's navigation when a redirect takes it elsewhere on the same site (`example.com` to
`www.example.com`; after it, that origin is the page's). `all` sends them everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from service.net.hosts import site_of

if TYPE_CHECKING:
    from service.contracts_identity import HeadersScope


def origin_of(url: str) -> tuple[str, str, int | None]:
    """Scheme, lower-case host and port (the scheme's default when absent) of `url`."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def sends_headers(
    scope: HeadersScope, page_url: str, url: str, *, navigation: bool = False
) -> bool:
    """Whether a request to `url` carries the headers of a request for the page at
    `page_url`; `navigation`: the request loads the page itself (a redirect's next hop)."""
    if scope == "all" or origin_of(url) == origin_of(page_url):
        return True
    scheme = urlsplit(url).scheme
    return navigation and scheme == urlsplit(page_url).scheme and site_of(url) == site_of(page_url)
