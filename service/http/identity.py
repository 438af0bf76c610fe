"""A request's headers, cookies, user agent, upstream proxy and certificate check as the
HTTP path sends them, hop by hop.

Cookies are matched as a browser matches them (RFC 6265 section 5.4): a host-only cookie (one
given by `url`) goes to that host, a domain cookie to the domain and its subdomains, on a path
under its own; a `secure` one to https only; an expired one to nobody. The answers' cookies
are not kept (no jar: every request is isolated).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import hdrs

from service.net.header_scope import sends_headers

if TYPE_CHECKING:
    from service.contracts import CrawlOptions
    from service.contracts_identity import Cookie, HeadersScope

__all__ = ["HttpIdentity"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpIdentity:
    """What one request's pages send besides what every fetch sends."""

    headers: tuple[tuple[str, str], ...] = ()
    cookies: tuple[Cookie, ...] = ()
    user_agent: str | None = None
    proxy: str | None = None
    """The request's upstream proxy (a URL or a pool's name)."""
    page_url: str | None = None
    """The page the headers are for (None: every URL is the page's)."""
    headers_scope: HeadersScope = "origin"
    verify_tls: bool = True
    """Whether the page's certificates are verified (`skip_tls_verification` turns it off)."""

    @classmethod
    def of(cls, options: CrawlOptions, page_url: str | None = None) -> HttpIdentity:
        return cls(
            headers=tuple(options.headers.items()),
            cookies=options.cookies,
            user_agent=options.user_agent,
            proxy=options.proxy,
            page_url=page_url,
            headers_scope=options.headers_scope,
            verify_tls=not options.skip_tls_verification,
        )

    def headers_for(self, url: str) -> dict[str, str]:
        """The headers of a request to `url`, a hop of the page's navigation (the request's
        own where `headers_scope` lets them go, its matching cookies, its user agent over
        any other)."""
        sent = dict(self.headers) if self._reaches(url) else {}
        jar = "; ".join(f"{c.name}={c.value}" for c in self.cookies if _matches(c, url))
        if jar:
            given = next((name for name in sent if name.lower() == "cookie"), None)
            sent[given or hdrs.COOKIE] = f"{sent[given]}; {jar}" if given else jar
        if self.user_agent is not None:
            sent = {name: value for name, value in sent.items() if name.lower() != "user-agent"}
            sent[hdrs.USER_AGENT] = self.user_agent
        return sent

    def _reaches(self, url: str) -> bool:
        if self.page_url is None:
            return True
        return sends_headers(self.headers_scope, self.page_url, url, navigation=True)


def _matches(cookie: Cookie, url: str, now: float | None = None) -> bool:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if cookie.expires is not None and cookie.expires <= (now or time.time()):
        return False
    if cookie.secure and parts.scheme != "https":
        return False
    if cookie.url is not None:
        return host == (urlsplit(cookie.url).hostname or "").lower()
    domain = (cookie.domain or "").lower().lstrip(".")
    if host != domain and not host.endswith(f".{domain}"):
        return False
    return _path_matches(cookie.path or "/", parts.path or "/")


def _path_matches(cookie_path: str, path: str) -> bool:
    if cookie_path in {path, "/"}:
        return True
    return path.startswith(cookie_path) and (
        cookie_path.endswith("/") or path[len(cookie_path)] == "/"
    )
