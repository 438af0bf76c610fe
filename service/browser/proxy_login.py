"""A browser context logs in to the egress proxy before a page whose requests cannot.

Chromium sends a context's proxy credential only after a 407 has asked for it (Playwright
answers), and then unasked on every later request. It asks only for a navigation or a
subresource of the page's own origin: a cross-origin subresource challenged first ends with
the 407 as its answer. A page's document Chromium fetches itself logs the context in; one
the worker fulfils (`headers.py`) does not, and without a login first a page's image on
another host was lost in 20 of 30 loads (0 of 5 when the page's own image was fulfilled
too). The context therefore loads the proxy's login address once (`egress.auth.LOGIN_PATH`)
before the first such page.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

from playwright.async_api import Error as PlaywrightError

if TYPE_CHECKING:
    from playwright.async_api import Page

    from service.browser.deadline import StepDeadline

LOGIN_DEADLINE_S: Final = 5.0
"""How long the login may take: one round trip to the proxy on loopback, and its 407."""


class ProxyLogin:
    """Whether one browser context has logged in to the egress proxy at `url` (None: it
    has no proxy to log in to)."""

    def __init__(self, url: str | None) -> None:
        self._url = url
        self._done = url is None
        self._lock = asyncio.Lock()

    async def ensure(self, page: Page, deadline: StepDeadline) -> None:
        """Log the context in with `page` (which leaves its document), unless it is; a
        login that fails is tried again by the next page."""
        async with self._lock:
            if self._done or self._url is None:
                return
            timeout_s = min(LOGIN_DEADLINE_S, deadline.remaining_s())
            with contextlib.suppress(PlaywrightError):
                answer = await page.goto(self._url, timeout=timeout_s * 1000)
                self._done = answer is not None and answer.ok
