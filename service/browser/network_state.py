"""What a context's network stack may remember that wiping it cannot clear.

A browser context's network context keeps state beside cookies and storage: the HTTP auth
cache (credentials of a URL with `user:password@` are sent unasked to every later URL under
that path), client-hint opt-ins (`Accept-CH`), HSTS, Reporting/NEL policies, compression
dictionaries. Chromium's DevTools protocol (156) has no command that clears any of these
(`Network.clearBrowserCache`, `Network.clearBrowserCookies` and `Storage.clearDataForOrigin`
with every storage type leave them), so a context whose requests could have left one is
closed instead of wiped (`taint`). A request still in flight when its context is wiped would
land after the wipe (a keepalive fetch or a beacon outlives its page, and its `Set-Cookie`
reaches the next request), so the wipe waits for the context's requests to end
(`RequestWatch`), and a context whose requests do not end is closed too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

    from playwright.async_api import Request, Response

REMEMBERING_HEADERS: Final = {
    "accept-ch": "client_hints",
    "critical-ch": "client_hints",
    "strict-transport-security": "hsts",
    "nel": "reporting",
    "report-to": "reporting",
    "reporting-endpoints": "reporting",
    "use-as-dictionary": "dictionary",
}
"""Response headers (lower case) that make the network context remember something about the
origin for later requests, and the name of what it remembers."""

CREDENTIALS: Final = "credentials"
"""The reason a context that requested a URL with `user:password@` is not reused: the
browser keeps the credential in its auth cache and sends it unasked afterwards."""

IN_FLIGHT: Final = "in_flight"
"""The reason a context whose requests did not end in time is not reused."""


def url_taint(url: str) -> str | None:
    """`CREDENTIALS` when `url` carries a user name or password; None otherwise."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return CREDENTIALS if parts.username or parts.password else None


def header_taint(headers: Mapping[str, str]) -> str | None:
    """What a response with `headers` (names in lower case) makes the network context
    remember, see `REMEMBERING_HEADERS`; None when nothing."""
    for name in headers:
        reason = REMEMBERING_HEADERS.get(name)
        if reason is not None:
            return reason
    return None


@dataclass(slots=True, eq=False)
class RequestWatch:
    """Watches one context's requests: which are in flight, and the first reason found to
    not reuse the context (`taint`). Fed by the context's `request`, `response`,
    `requestfinished` and `requestfailed` events."""

    taint: str | None = None
    _in_flight: set[Request] = field(default_factory=set)
    _ended: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._ended.set()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def started(self, request: Request) -> None:
        self._in_flight.add(request)
        self._ended.clear()
        self._taint(url_taint(request.url))

    def answered(self, response: Response) -> None:
        self._taint(header_taint(response.headers))

    def ended(self, request: Request) -> None:
        self._in_flight.discard(request)
        if not self._in_flight:
            self._ended.set()

    async def settled(self, deadline_s: float) -> bool:
        """Whether every request of the context has ended, waiting up to `deadline_s`."""
        try:
            await asyncio.wait_for(self._ended.wait(), deadline_s)
        except TimeoutError:
            return False
        return True

    def _taint(self, reason: str | None) -> None:
        if reason is not None and self.taint is None:
            self.taint = reason
