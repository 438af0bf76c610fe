"""Which hosts go straight to the browser in `auto` mode: pure policy, the clock passed in.

Crawlee's AdaptivePlaywrightCrawler predicts a URL's rendering type from similar URLs it has
classified (a logistic regression over URL-path similarity) and, for a share of pages
(`detection_ratio`, 10% by default), renders with both crawlers to compare the results. Here
the check is deterministic (`shell.shell_reason` on every HTTP answer), so no page is fetched
twice to learn; what is learned is only the cheap shortcut: a host whose last
`threshold` pages in a row needed the browser is sent straight to it, skipping an HTTP fetch
that would be thrown away. On a host that mixes static and script-rendered pages the static
pages keep breaking the streak, so they keep the HTTP path (an HTTP fetch wasted on a
script-rendered page costs a few milliseconds; a browser page costs a hundred or more of CPU).

A decision expires after `ttl_s` or `max_pages` pages sent by it, whichever comes first; the
next page of the host then probes HTTP once: if it needs the browser again the decision is
renewed at once, if not the host is back on HTTP. Hosts are forgotten least recently used
first beyond `max_hosts`. Memory is per worker: each replica learns on its own. A threshold
of 0 learns nothing (every page is fetched over HTTP first).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.settings import Settings

THRESHOLD: Final = 3
"""Pages in a row of one host that needed the browser before the host goes straight to it."""

TTL_S: Final = 600.0
"""How long a host's browser decision holds (10 minutes)."""

MAX_PAGES: Final = 100
"""Pages a browser decision sends straight to the browser before HTTP is probed again."""

MAX_HOSTS: Final = 10_000
"""Hosts remembered at once; the least recently used are forgotten first."""


@dataclass(slots=True)
class _Host:
    streak: int = 0
    """Pages in a row that needed the browser."""
    decided_at: float | None = None
    """When the host was sent to the browser (None: it is on HTTP)."""
    sent: int = 0
    """Pages sent straight to the browser since then."""


class HostRenderMemory:
    """Remembers, per host, whether its pages keep needing the browser."""

    def __init__(
        self,
        *,
        threshold: int = THRESHOLD,
        ttl_s: float = TTL_S,
        max_pages: int = MAX_PAGES,
        max_hosts: int = MAX_HOSTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = threshold
        self._ttl_s = ttl_s
        self._max_pages = max_pages
        self._max_hosts = max_hosts
        self._clock = clock
        self._hosts: OrderedDict[str, _Host] = OrderedDict()

    @classmethod
    def from_settings(cls, settings: Settings) -> HostRenderMemory:
        return cls(threshold=settings.render_learn_after)

    def __len__(self) -> int:
        return len(self._hosts)

    def straight_to_browser(self, host: str) -> bool:
        """Whether the next page of `host` skips HTTP (and counts against the decision)."""
        state = self._hosts.get(host)
        if state is None or state.decided_at is None:
            return False
        self._hosts.move_to_end(host)
        expired = self._clock() - state.decided_at >= self._ttl_s
        if expired or state.sent >= self._max_pages:
            state.decided_at = None  # probe HTTP once: one more browser page renews it
            state.streak = self._threshold - 1
            return False
        state.sent += 1
        return True

    def needed_browser(self, host: str) -> None:
        """An HTTP answer of `host` was a shell (or lacked `wait_for`): the browser did it."""
        state = self._state(host)
        state.streak += 1
        learned = self._threshold > 0 and state.streak >= self._threshold
        if learned and state.decided_at is None:
            state.decided_at = self._clock()
            state.sent = 0

    def static_sufficed(self, host: str) -> None:
        """An HTTP answer of `host` was the whole page."""
        state = self._state(host)
        state.streak = 0
        state.decided_at = None

    def _state(self, host: str) -> _Host:
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
            while len(self._hosts) > self._max_hosts:
                self._hosts.popitem(last=False)
        else:
            self._hosts.move_to_end(host)
        return state
