"""What the egress proxy refused recently, so a fetch can tell a refusal from a broken network.

For an https navigation the browser asks the proxy for a `CONNECT host:port` tunnel; when the
URL policy forbids the target the proxy answers 403, but Chromium never shows a proxy's answer
to a CONNECT: the page fails with `ERR_TUNNEL_CONNECTION_FAILED`, as it would for a target that
is down. The proxy reports each refusal here (its `on_blocked` hook, called before the browser
gets the 403), and the fetch asks whether the host and port of its failed navigation were
refused since the page started. A CONNECT that the request's upstream proxy failed is
reported the same way, its reason starting with `UPSTREAM_FAILED` (`proxy_error`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from service.egress.head import BadRequestError, split_authority
from service.net.policy import DEFAULT_PORTS

if TYPE_CHECKING:
    from collections.abc import Callable

UPSTREAM_FAILED: Final = "proxy_error: "
"""How a reason starts when the target was not refused by the policy but the request's
upstream proxy failed on it (Chromium shows that CONNECT's 502 as the same tunnel failure)."""

MAX_REMEMBERED: Final = 4096
"""Refused host:port pairs kept; the oldest refusal is forgotten first."""

_Key = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """The last time a target was refused, and why."""

    reason: str
    at: float
    """`time.monotonic()` of the refusal."""


class RefusedTargets:
    """Recent refusals by host and port: `record` is the proxy's `on_blocked` hook."""

    def __init__(
        self, capacity: int = MAX_REMEMBERED, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._capacity = capacity
        self._clock = clock
        self._refused: OrderedDict[_Key, Refusal] = OrderedDict()

    def now(self) -> float:
        """The clock refusals are stamped with; a page notes it when it starts."""
        return self._clock()

    def record(self, target: str, reason: str) -> None:
        """A refused target: `host:port` of a CONNECT, or the absolute URL of a plain request."""
        key = _key_of(target)
        if key is None:
            return
        self._refused[key] = Refusal(reason=reason, at=self._clock())
        self._refused.move_to_end(key)
        while len(self._refused) > self._capacity:
            self._refused.popitem(last=False)

    def reason_since(self, url: str, since: float) -> str | None:
        """The policy's reason if the host and port of `url` were refused at or after `since`."""
        key = _key_of(url)
        refusal = self._refused.get(key) if key is not None else None
        if refusal is None or refusal.at < since:
            return None
        return refusal.reason


def _key_of(target: str) -> _Key | None:
    """Host (lower case, IPv6 without brackets) and port of a URL or a `host:port` authority."""
    try:
        if "://" in target:
            parts = urlsplit(target)
            port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower())
            host = parts.hostname
        else:
            raw_host, port = split_authority(target)
            host = raw_host.removeprefix("[").removesuffix("]")
    except (BadRequestError, ValueError):
        return None
    if not host or port is None:
        return None
    return host.lower(), port
