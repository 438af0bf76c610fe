"""Whether the page is leaving its document, and how its navigations failed, cheaply.

A page may navigate on its own after `goto` (meta refresh, `location.href = ...`, a submitted
form); reading it then fails with "the page is navigating", or reads a document that is about
to go. The watch answers from signals that cost nothing per subresource:

- a probe script, added to every document of the page's context when the context opens,
  collects the document's
  cross-document `navigate` events (Navigation API: fired synchronously when a script, a link
  or a form starts a navigation, so a navigation begun before a read is seen by the read);
- `performance.timeOrigin` tells documents apart (`history.pushState` keeps it, a new
  document has its own);
- Playwright's `framenavigated` (commits), `domcontentloaded` and `requestfailed` (failed
  main-frame navigations: which URL failed and how) events, once per document or failure.

Listening to every `request` and `response` instead costs the worker about 0.35 ms of CPU per
subresource (measured: +50 ms a page with 150 images).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Self
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError

from service.browser.failures import FailedNavigation
from service.contracts import ALLOWED_SCHEMES

if TYPE_CHECKING:
    from types import TracebackType

    from playwright.async_api import Frame, Page, Request

    from service.browser.deadline import StepDeadline
    from service.egress.refusals import RefusedTargets

PROBE_NAME: Final = "__crawlstreamProbe"

SETTLE_NAME: Final = "__crawlstreamSettle"

CHANGE_NAME: Final = "__crawlstreamChange"

TIMER_HORIZON_MS: Final = 3000
"""One-shot timers up to this delay count as work the page has still to do before it settles
(content inserted "a moment after load"); longer ones (a session refresh) do not."""

SETTLE_POLL_MS: Final = 50
"""How often the page's settle check looks again while waiting."""


def _probe_script(**marks: object) -> str:
    """`probe.js` with each `@NAME@` mark replaced by its value."""
    script = (Path(__file__).parent / "probe.js").read_text(encoding="utf-8")
    script = script.split("\n", 1)[1].rstrip("\n")  # without its heading comment
    for name, value in marks.items():
        script = script.replace(f"@{name}@", str(value))
    unfilled = sorted(set(re.findall(r"@([A-Z_]+)@", script)))
    if unfilled:
        raise RuntimeError(f"probe.js marks without a value: {unfilled}")
    return script


PROBE_SCRIPT: Final = _probe_script(
    PROBE_NAME=PROBE_NAME,
    SETTLE_NAME=SETTLE_NAME,
    CHANGE_NAME=CHANGE_NAME,
    TIMER_HORIZON_MS=TIMER_HORIZON_MS,
    SETTLE_POLL_MS=SETTLE_POLL_MS,
)
"""Runs first in each document, before the page's scripts can change what it relies on: collects
the URLs of the navigations the document starts, behind a property the page cannot replace, and
keeps the serializers `page.content()` uses so a page cannot replace those either.

It also tracks whether the document is still being built by its scripts: DOM mutations after
DOMContentLoaded (a MutationObserver), one-shot timers due within `TIMER_HORIZON_MS`, and
`fetch`/`XMLHttpRequest` calls in flight. `SETTLE_NAME(quietMs, maxMs)` resolves true once
nothing is pending and the DOM has not changed for `quietMs` since the last activity (at once
on a page whose scripts did nothing after DOMContentLoaded), false after `maxMs`;
`CHANGE_NAME(maxMs)` resolves true at the next change, false after `maxMs`. Intervals are not
tracked: a clock that ticks forever makes `SETTLE_NAME` answer false at `maxMs`, not hang."""

READ_PROBE: Final = f"""(withHtml) => window.{PROBE_NAME} ? window.{PROBE_NAME}(withHtml)
  : [performance.timeOrigin, 0, location.href, [], ...(withHtml ? [
      (document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '')
      + (document.documentElement ? document.documentElement.outerHTML : '')] : [])]"""
"""Which document this is, its status, the navigations it has started and (with `withHtml`) its
HTML as `page.content()` gives it, in one round trip: the HTML is that document's, whatever
happens next. Documents without the probe script, such as Chromium's error page, answer what
they can."""

PROBE_FIELDS: Final = 4

COMMITS_KEPT: Final = 4
"""Main-frame commits a watch remembers: what a redirect loop's failure names."""

SETTLE_SCRIPT: Final = f"""([quietMs, maxMs]) => window.{SETTLE_NAME}
  ? window.{SETTLE_NAME}(quietMs, maxMs) : true"""
"""Documents without the probe script (Chromium's error page) count as settled."""

SETTLED_READ_SCRIPT: Final = f"""async ([quietMs, maxMs]) => {{
  if (window.{SETTLE_NAME}) await window.{SETTLE_NAME}(quietMs, maxMs);
  return ({READ_PROBE})(true);
}}"""
"""`SETTLE_SCRIPT`, then `READ_PROBE` with the HTML, in one round trip (the first look at a
document after its load waits for its renderer: 15 ms p50 on the browser path, two of them
cost twice)."""

CHANGE_SCRIPT: Final = f"""(maxMs) => window.{CHANGE_NAME}
  ? window.{CHANGE_NAME}(maxMs) : new Promise((resolve) => setTimeout(resolve, maxMs, false))"""

WAIT_MARGIN_S: Final = 2.0
"""Time beyond an in-page wait for its answer to come back."""

ERROR_PAGE: Final = "chrome-error://"
"""Where Chromium commits the page a failed navigation shows."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One look at the current document."""

    origin: float
    """`performance.timeOrigin`: the same for one document, whatever its URL becomes."""
    status: int
    """HTTP status of the answer that made the document (0 when unknown)."""
    url: str
    leaving: tuple[str, ...]
    """http(s) URLs the document has started to navigate to, oldest first."""
    failures: int
    """Failed main-frame navigations the watch had seen when the probe was sent."""

    @property
    def failed(self) -> bool:
        return self.url.startswith(ERROR_PAGE)

    def same_document(self, other: Probe) -> bool:
        return self.origin == other.origin and self.failed == other.failed


class NavigationWatch:
    """`async with NavigationWatch(page, refusals) as watch:` watches `page` inside the block."""

    def __init__(self, page: Page, refusals: RefusedTargets | None = None) -> None:
        self._page = page
        self._main = page.main_frame
        self._refusals = refusals
        self._since = refusals.now() if refusals is not None else 0.0
        self._changed = asyncio.Event()
        self.events = 0
        """Commits, failed main-frame navigations and crashes seen so far."""
        self.failures = 0
        self.failed: Request | None = None
        """The last main-frame navigation request that failed."""
        self.crashed = False
        self.loaded_documents = 0
        """Main-frame documents that reached DOMContentLoaded during the fetch."""
        self.committed: deque[str] = deque(maxlen=COMMITS_KEPT)
        """The URLs of the main frame's last commits, oldest first."""
        self.documents: dict[float, int] = {}
        """Origins of the documents probed so far -> how many of their navigations were
        already waited for."""

    async def __aenter__(self) -> Self:
        page = self._page
        page.on("framenavigated", self._on_committed)
        page.on("requestfailed", self._on_failed)
        page.on("crash", self._on_crash)
        page.on("domcontentloaded", self._on_loaded)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        page = self._page
        page.remove_listener("framenavigated", self._on_committed)
        page.remove_listener("requestfailed", self._on_failed)
        page.remove_listener("crash", self._on_crash)
        page.remove_listener("domcontentloaded", self._on_loaded)

    async def probe(self, timeout_s: float) -> Probe:
        """The current document; a Playwright error when a navigation replaced it meanwhile."""
        failures = self.failures
        answer = await asyncio.wait_for(self._page.evaluate(READ_PROBE, False), timeout_s)  # noqa: FBT003
        probe = _parse_probe(answer, failures=failures, url=self._page.url)
        self.documents.setdefault(probe.origin, 0)
        return probe

    async def read(self, timeout_s: float) -> tuple[Probe, str]:
        """The current document and its HTML, read at one instant (one round trip)."""
        failures = self.failures
        answer = await asyncio.wait_for(self._page.evaluate(READ_PROBE, True), timeout_s)  # noqa: FBT003
        return self._reading(answer, failures)

    async def settled_read(
        self, quiet_s: float, max_s: float, deadline: StepDeadline
    ) -> tuple[Probe, str]:
        """`settle`, then `read`, in one round trip; the settling is best effort as in
        `settle`: a page too busy to answer within `max_s` and a margin is read on its own,
        in what is left of `deadline` then."""
        failures = self.failures
        try:
            answer = await asyncio.wait_for(
                self._page.evaluate(SETTLED_READ_SCRIPT, [quiet_s * 1000, max_s * 1000]),
                min(max_s + WAIT_MARGIN_S, deadline.remaining_s()),
            )
        except TimeoutError:
            return await self.read(deadline.remaining_s())
        return self._reading(answer, failures)

    def _reading(self, answer: object, failures: int) -> tuple[Probe, str]:
        html = answer.pop() if isinstance(answer, list) and len(answer) == PROBE_FIELDS + 1 else ""
        probe = _parse_probe(answer, failures=failures, url=self._page.url)
        self.documents.setdefault(probe.origin, 0)
        return probe, html if isinstance(html, str) else ""

    def new_leaving(self, probe: Probe) -> tuple[str, ...]:
        """The navigations `probe`'s document started that were not waited for yet; from now
        on they count as waited for."""
        waited = self.documents.get(probe.origin, 0)
        self.documents[probe.origin] = len(probe.leaving)
        return probe.leaving[waited:]

    async def settle(self, quiet_s: float, max_s: float) -> bool:
        """Wait until the document's scripts stopped changing it (True) or `max_s` (False;
        also when a busy page does not answer in time: the wait is best effort)."""
        return await self._wait_in_page(SETTLE_SCRIPT, [quiet_s * 1000, max_s * 1000], max_s)

    async def changed(self, max_s: float) -> bool:
        """Wait for the document's next change (True) or `max_s` (False)."""
        return await self._wait_in_page(CHANGE_SCRIPT, max_s * 1000, max_s)

    async def _wait_in_page(self, script: str, arg: object, max_s: float) -> bool:
        try:
            answer = await asyncio.wait_for(self._page.evaluate(script, arg), max_s + WAIT_MARGIN_S)
        except TimeoutError:
            return False
        return answer is True

    async def replaced(self, current: Probe, timeout_s: float) -> bool:
        """Wait until `current` is replaced by another document or a main-frame navigation
        fails (after which the browser may stay on `current`); False when neither happens
        within `timeout_s`."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while True:
            if self.crashed or self.failures != current.failures:
                return True
            events = self.events
            if await self._replaced_now(current, end - loop.time()):
                return True
            self._changed.clear()
            if self.events == events:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), max(0.0, end - loop.time()))
            if self.events == events and loop.time() >= end:
                return False

    async def failure(self, error: str | None = None) -> FailedNavigation | None:
        """How the last failed main-frame navigation failed (`error`: Playwright's message
        about it, when `goto` gave one); None when none failed."""
        request = self.failed
        if request is None:
            return None
        response = await request.response()
        return FailedNavigation(
            error=error or request.failure or "net::ERR_FAILED",
            url=request.url,
            status=response.status if response is not None else None,
            refused=self.refused(request.url),
        )

    async def renderer_alive(self, timeout_s: float) -> bool:
        """Whether the page's renderer still answers: False once it crashed or was killed
        (the crash event may come after the navigation's failure, an evaluate never lies);
        True when it only does not answer within `timeout_s` (busy, not known dead)."""
        if self.crashed:
            return False
        try:
            await asyncio.wait_for(self._page.evaluate("1"), timeout_s)
        except PlaywrightError:
            return False
        except TimeoutError:
            return True
        return True

    def refused(self, url: str) -> str | None:
        """The egress proxy's reason if it refused the host and port of `url` during the fetch."""
        if self._refusals is None:
            return None
        return self._refusals.reason_since(url, self._since)

    async def _replaced_now(self, current: Probe, timeout_s: float) -> bool:
        try:
            now = await self.probe(max(timeout_s, 0.0))
        except PlaywrightError:
            return True  # the document went away under the probe
        except TimeoutError:
            return False
        return not now.same_document(current)

    def _bump(self) -> None:
        self.events += 1
        self._changed.set()

    def _on_committed(self, frame: Frame) -> None:
        if frame == self._main:
            self.committed.append(frame.url)
            self._bump()

    def _on_failed(self, request: Request) -> None:
        if request.is_navigation_request() and request.frame == self._main:
            self.failed = request
            self.failures += 1
            self._bump()

    def _on_loaded(self, _page: Page) -> None:
        self.loaded_documents += 1

    def _on_crash(self, _page: Page) -> None:
        self.crashed = True
        self._bump()


def _parse_probe(answer: object, *, failures: int, url: str) -> Probe:
    """The probe's answer, read defensively: it comes from inside the page."""
    fields = answer if isinstance(answer, list) and len(answer) == PROBE_FIELDS else []
    origin, status, href, leaving = fields or (0.0, 0, url, [])
    targets = leaving if isinstance(leaving, list) else []
    return Probe(
        origin=float(origin) if isinstance(origin, int | float) else 0.0,
        status=status if isinstance(status, int) else 0,
        url=href if isinstance(href, str) else url,
        leaving=tuple(target for target in targets if isinstance(target, str) and is_http(target)),
        failures=failures,
    )


def is_http(url: str) -> bool:
    """Whether the browser would load `url` over the network (http or https)."""
    try:
        return urlsplit(url).scheme.lower() in ALLOWED_SCHEMES
    except ValueError:
        return False
