"""Read a loaded page once it has stopped navigating by itself.

After `goto` the page may still move on: a script that sets `location` (while parsing, on
`load`, from a timer), a meta refresh, a form it submits. Each round waits for `wait_until`,
looks at the document, follows a navigation it has started (waiting for the next document or
the failure), waits for `wait_for`, reads the content, and starts over if the document changed
meanwhile or started to leave. A page that declares a short meta refresh to another URL is
given the delay to leave. A navigation that a timer starts after the content was read is not
waited for: nothing announces it.

`load` is not the end of a page that renders with scripts: content inserted by a timer, by
what a `fetch()` returns or by a framework mounting late comes after it. Each round therefore
waits for the document to settle (parsed, nothing pending, the DOM quiet for `QUIET_S`; at most
`SettleLimits.settle_s`), and a document that is still an app shell when read (an empty mount
point or main landmark, `shell.rendered_shell_reason`) is read again at its next change, for
up to `SettleLimits.shell_wait_s`; one that never fills is `not_rendered`, never an empty
success. A request's `wait_for` replaces the shell check: it names what the content is.
A document still being parsed has not settled: Playwright may report `load` of the document
before for a moment after the next one (a script's navigation) has committed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from service.browser.failures import (
    PageFailedError,
    classify_message,
    classify_navigation,
    first_line,
)
from service.browser.meta_refresh import meta_refresh
from service.browser.navigation import is_http
from service.content.shell import rendered_shell_reason
from service.contracts import ErrorCode, Format

if TYPE_CHECKING:
    from playwright.async_api import Page

    from service.browser.deadline import StepDeadline
    from service.browser.navigation import NavigationWatch, Probe
    from service.contracts import CrawlOptions
    from service.settings import Settings

MAX_OWN_NAVIGATIONS: Final = 10
"""Documents a page may move on to by itself after the first; more is a client-side redirect
loop."""

MAX_READS: Final = 4 * (MAX_OWN_NAVIGATIONS + 1)
"""Readings navigations may interrupt before the page counts as never settling."""

REFRESH_FOLLOWED_UP_TO_S: Final = 5.0
"""Longest meta refresh delay waited for; a page refreshing later is read as it is."""

REFRESH_GRACE_S: Final = 2.0
"""Time beyond a meta refresh's delay for the browser to start the navigation."""

QUIET_S: Final = 0.25
"""How long the DOM must stay unchanged, with no timer or request pending, to count as
settled (a page whose scripts did nothing after DOMContentLoaded is settled at once)."""

CHANGE_WAIT_S: Final = 1.0
"""Longest single wait for a shell's next change before it is looked at again."""

_NAVIGATING: Final = ("is navigating", "Execution context was destroyed")
"""Playwright's words for a read that the page's navigation interrupted."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """A document as it stood when nothing was navigating."""

    html: str
    url: str
    status: int | None
    """HTTP status of the answer that made the document, when the browser knows it."""
    screenshot: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SettleLimits:
    """How long a page's scripts are given to build its document."""

    settle_s: float = 3.0
    """Longest wait for the document to settle; a page that never stops changing (a ticking
    clock, a polling loop) is read after it. 0: read at `wait_until`, no shell check."""
    shell_wait_s: float = 10.0
    """Longest wait for a rendered document that is still an app shell to fill."""

    @classmethod
    def from_settings(cls, settings: Settings) -> SettleLimits:
        return cls(
            settle_s=settings.render_settle.total_seconds(),
            shell_wait_s=settings.render_shell_wait.total_seconds(),
        )


class _NavigatedError(Exception):
    """The document changed or started to leave while it was read: read it again."""


async def read_settled(
    page: Page,
    watch: NavigationWatch,
    options: CrawlOptions,
    navigation: StepDeadline,
    deadline: StepDeadline,
    limits: SettleLimits,
) -> Reading:
    """The page's document once it stays. Raises `PageFailedError` for a navigation that
    failed, a bad selector or a redirect loop; navigations and waits end by `navigation`,
    reading by `deadline`."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    budget_s = min(navigation.left_s(), limits.shell_wait_s)
    check = limits.settle_s > 0 and not options.wait_for
    while True:
        reading = await _read_stable(page, watch, options, navigation, deadline, limits)
        reason = rendered_shell_reason(reading.html) if check else None
        if reason is None:
            return reading
        waited_s = loop.time() - started
        left = budget_s - waited_s
        if left <= 0:
            raise PageFailedError(
                ErrorCode.NOT_RENDERED,
                f"the page is still an app shell ({reason.replace('_', ' ')})"
                f" {waited_s:.1f} s after it loaded: its content never appeared",
            )
        await watch.changed(min(left, CHANGE_WAIT_S))


async def _read_stable(
    page: Page,
    watch: NavigationWatch,
    options: CrawlOptions,
    navigation: StepDeadline,
    deadline: StepDeadline,
    limits: SettleLimits,
) -> Reading:
    """One reading of the document the page stays on. A page that navigated by itself more
    than `MAX_OWN_NAVIGATIONS` times is a redirect loop also when the chain ended before the
    reading (on a busy machine the whole chain may run while the reader waits)."""
    for _ in range(MAX_READS):
        if _kept_navigating(watch):
            break
        try:
            reading = await _read(page, watch, options, navigation, deadline, limits)
        except _NavigatedError:
            continue
        if not _kept_navigating(watch):
            return reading
        break
    raise PageFailedError(
        ErrorCode.HTTP_ERROR,
        f"the page kept navigating by itself ({watch.loaded_documents} documents loaded, more"
        f" than {MAX_OWN_NAVIGATIONS} of its own: a client-side redirect loop; the last:"
        f" {' -> '.join(watch.committed) or 'none committed'})",
    )


def _kept_navigating(watch: NavigationWatch) -> bool:
    """More documents loaded than the first and `MAX_OWN_NAVIGATIONS` of the page's own."""
    return watch.loaded_documents > MAX_OWN_NAVIGATIONS + 1


async def _read(
    page: Page,
    watch: NavigationWatch,
    options: CrawlOptions,
    navigation: StepDeadline,
    deadline: StepDeadline,
    limits: SettleLimits,
) -> Reading:
    """One reading of the current document, after its `wait_until` state, its scripts'
    settling and `wait_for`.

    The document and its HTML are read in one round trip; a `wait_for` or a screenshot
    needs a look before (the selector is waited for in a document that stays) and, for the
    screenshot, after (the picture is of the document read)."""
    try:
        await page.wait_for_load_state(options.wait_until, timeout=navigation.remaining_ms())
        before = None
        if options.wait_for or Format.SCREENSHOT in options.formats:
            before = await _look_first(page, watch, options, navigation, limits)
            after, html = await watch.read(deadline.remaining_s())
        elif limits.settle_s > 0:  # the common case: settled and read in one round trip
            settle_s = min(limits.settle_s, navigation.left_s())
            after, html = await watch.settled_read(QUIET_S, settle_s, deadline)
        else:
            after, html = await watch.read(deadline.remaining_s())
        screenshot = None
        if Format.SCREENSHOT in options.formats:
            screenshot = await page.screenshot(
                full_page=options.screenshot_full_page, timeout=deadline.remaining_ms(), type="png"
            )
            if not (await watch.probe(deadline.remaining_s())).same_document(after):
                raise _NavigatedError
    except PlaywrightTimeoutError:
        raise
    except PlaywrightError as exc:
        if _interrupted(exc):
            raise _NavigatedError from exc
        raise
    if before is not None and not after.same_document(before):
        raise _NavigatedError
    await _raise_if_failed(watch, after)
    await _follow(watch, after, navigation)
    await _follow_refresh(watch, html, after, navigation)
    return Reading(html=html, url=after.url, status=after.status or None, screenshot=screenshot)


async def _look_first(
    page: Page,
    watch: NavigationWatch,
    options: CrawlOptions,
    navigation: StepDeadline,
    limits: SettleLimits,
) -> Probe:
    """The settled document before its `wait_for` or screenshot (followed if it is leaving,
    failed if it shows Chromium's error page), after which the selector is waited for."""
    if limits.settle_s > 0:
        await watch.settle(QUIET_S, min(limits.settle_s, navigation.left_s()))
    before = await watch.probe(navigation.remaining_s())
    await _raise_if_failed(watch, before)
    await _follow(watch, before, navigation)
    if options.wait_for:
        await _wait_for(page, watch, options.wait_for, navigation)
    return before


async def _raise_if_failed(watch: NavigationWatch, probe: Probe) -> None:
    """The page shows Chromium's error page: a navigation it made by itself failed."""
    if not probe.failed:
        return
    failure = await watch.failure()
    if failure is None:
        raise PageFailedError(ErrorCode.CONNECTION, "a navigation of the page failed")
    raise PageFailedError(*classify_navigation(failure))


async def _follow(watch: NavigationWatch, probe: Probe, navigation: StepDeadline) -> None:
    """If the document started to leave, wait for the next one (or the failure)."""
    if not watch.new_leaving(probe):
        return
    if not await watch.replaced(probe, navigation.remaining_s()):
        raise PlaywrightTimeoutError(f"the page did not finish leaving {probe.url}")
    raise _NavigatedError


async def _follow_refresh(
    watch: NavigationWatch, html: str, probe: Probe, navigation: StepDeadline
) -> None:
    """If the document declares a short meta refresh to another http(s) URL, give it the
    delay to leave."""
    refresh = meta_refresh(html, probe.url)
    if refresh is None or refresh.delay_s > REFRESH_FOLLOWED_UP_TO_S:
        return
    if not is_http(refresh.url) or _same_url(refresh.url, probe.url):
        return
    wait_s = refresh.delay_s + REFRESH_GRACE_S
    if wait_s <= navigation.left_s() and await watch.replaced(probe, wait_s):
        raise _NavigatedError


async def _wait_for(
    page: Page, watch: NavigationWatch, selector: str, navigation: StepDeadline
) -> None:
    """Wait for `selector`; an error that is neither a timeout, a navigation nor the page's end
    is about the selector, the one input of this call."""
    try:
        await page.wait_for_selector(selector, state="attached", timeout=navigation.remaining_ms())
    except PlaywrightTimeoutError:
        raise
    except PlaywrightError as exc:
        message = first_line(exc)
        ended = classify_message(message.replace(selector, "")) == ErrorCode.BROWSER_CRASH
        if _interrupted(exc) or ended or page.is_closed() or watch.crashed:
            raise
        detail = message.removeprefix("Page.wait_for_selector: ")
        raise PageFailedError(
            ErrorCode.INVALID_SELECTOR, f"wait_for {selector!r} cannot be evaluated: {detail}"
        ) from exc


def _interrupted(exc: PlaywrightError) -> bool:
    return any(words in first_line(exc) for words in _NAVIGATING)


def _same_url(first: str, second: str) -> bool:
    return first.partition("#")[0] == second.partition("#")[0]
