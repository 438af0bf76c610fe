"""Render one URL in a pooled page and turn it into content: every step under one deadline."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from service.browser.actions import run_actions
from service.browser.deadline import MIN_STEP_S, StepDeadline
from service.browser.failures import (
    FailedNavigation,
    PageFailedError,
    classify_browser_error,
    classify_navigation,
    first_line,
)
from service.browser.headers import scoped_headers
from service.browser.navigation import NavigationWatch
from service.browser.settle import Reading, SettleLimits, read_settled
from service.content.page import PageContent, failed, page_content
from service.content.pdf import is_pdf
from service.contracts import ALLOWED_SCHEMES, ErrorCode, Format
from service.egress.verdict import HTTP_FORBIDDEN, proxy_refusal
from service.errors import BrowserUnavailableError

if TYPE_CHECKING:
    from playwright.async_api import Page, Response

    from service.browser.context import RequestContext
    from service.content.extract import FollowRules
    from service.contracts import CrawlOptions
    from service.contracts_actions import ActionsOutput
    from service.egress.refusals import RefusedTargets

EXTRACTION_SHARE: Final = 0.25
"""Part of the page deadline kept back for content, extraction and screenshot."""

ACTIONS_END: Final = 0.7
"""Part of the page deadline by which the page's actions must be done (the document is then
read again, settled, by `1 - EXTRACTION_SHARE / 2`)."""

NO_CONTENT: Final = frozenset({204, 205})
"""Statuses that answer a navigation with nothing to show: an ok result without content."""

RENDERER_PROBE_S: Final = 2.0
"""Deadline of the one round trip that tells an aborted navigation of a live page (a download,
a redirect to javascript:) from one whose renderer was killed under it."""

GOTO_ATTEMPTS: Final = 2
"""Tries of `goto` when a navigation the previous document started interrupts it."""

_INTERRUPTED: Final = "interrupted by another navigation"


async def render_page(
    context: RequestContext,
    url: str,
    options: CrawlOptions,
    *,
    timeout_s: float,
    max_result_bytes: int,
    refusals: RefusedTargets | None = None,
    follow: FollowRules | None = None,
    settle: SettleLimits | None = None,
) -> PageContent:
    """Render `url` and extract what `options` asks for (and the links to follow, with
    `follow`); a failure becomes a failed result.

    `refusals` (the egress proxy's) tells a refused https target from an unreachable one.
    Raises `BrowserUnavailableError` when the browser itself died, so the page is retried.
    """
    deadline = StepDeadline(timeout_s)
    try:
        async with (
            asyncio.timeout(timeout_s * 1.5 + MIN_STEP_S * 5),
            context.page() as page,
            scoped_headers(page, url, options, deadline, context.proxy_login),
            NavigationWatch(page, refusals) as watch,
        ):
            return await _render(
                page,
                watch,
                url,
                options,
                deadline,
                max_result_bytes,
                follow,
                settle or SettleLimits(),
            )
    except BrowserUnavailableError:
        raise
    except PageFailedError as exc:
        return failed(exc.code, exc.message)
    except (PlaywrightTimeoutError, TimeoutError):
        return failed(ErrorCode.TIMEOUT, f"page did not finish within {timeout_s:.1f} s")
    except PlaywrightError as exc:
        if not context.browser_alive:
            raise BrowserUnavailableError(f"browser died while loading {url}") from exc
        code, message = classify_browser_error(exc)
        return failed(code, message)


async def _render(
    page: Page,
    watch: NavigationWatch,
    url: str,
    options: CrawlOptions,
    deadline: StepDeadline,
    max_bytes: int,
    follow: FollowRules | None,
    settle: SettleLimits,
) -> PageContent:
    navigation = deadline.share(1 - EXTRACTION_SHARE)
    try:
        response = await _goto(page, url, options, navigation.remaining_s())
    except PlaywrightTimeoutError:
        raise
    except PlaywrightError as exc:
        return await _goto_failed(exc, watch, url, options, max_bytes)
    if response is not None and is_pdf(response.headers.get("content-type", "")):
        return _a_document(response)
    reading = await read_settled(page, watch, options, navigation, deadline, settle)
    done = None
    if options.actions:
        done = await run_actions(page, options.actions, deadline.share(ACTIONS_END))
        after = deadline.share(1 - EXTRACTION_SHARE / 2)
        reading = await read_settled(page, watch, _unwaited(options), after, deadline, settle)
    answer = response if response is not None and _made(response, reading) else None
    refused = _left_the_web(reading) or proxy_failure(answer) or _refused(watch, reading)
    if refused is not None:
        return refused
    shot = base64.b64encode(reading.screenshot).decode() if reading.screenshot else None
    printed = await _printed(page, deadline) if Format.PDF in options.formats else None
    return await _content(
        reading.status,
        answer,
        reading.url,
        reading.html,
        _Pictures(screenshot=shot, pdf=printed, actions=done),
        options,
        max_bytes,
        follow,
    )


def _unwaited(options: CrawlOptions) -> CrawlOptions:
    """The options the document is read with after the actions: its `wait_for` was met before
    them, and a step may have taken the page elsewhere on purpose."""
    return options.model_copy(update={"wait_for": None}) if options.wait_for else options


def _a_document(response: Response) -> PageContent:
    """The browser's PDF viewer is no page to read: a `download` failure, which the renderer
    answers by fetching the document over HTTP (`paths.renderer`)."""
    message = f"{response.url}: a PDF document, not a page"
    return failed(ErrorCode.DOWNLOAD, message, final_url=response.url, status_code=response.status)


async def _printed(page: Page, deadline: StepDeadline) -> str:
    """The page printed to PDF (print media, backgrounds drawn), base64."""
    async with asyncio.timeout(deadline.remaining_s()):
        printed = await page.pdf(print_background=True)
    return base64.b64encode(printed).decode()


async def _goto(page: Page, url: str, options: CrawlOptions, timeout_s: float) -> Response | None:
    """`page.goto`, once more if a navigation the page's previous document started took over."""
    for attempt in range(GOTO_ATTEMPTS):
        try:
            return await page.goto(url, wait_until=options.wait_until, timeout=timeout_s * 1000)
        except PlaywrightError as exc:
            if _INTERRUPTED not in str(exc) or attempt + 1 == GOTO_ATTEMPTS:
                raise
    return None


async def _goto_failed(
    exc: PlaywrightError, watch: NavigationWatch, url: str, options: CrawlOptions, max_bytes: int
) -> PageContent:
    """The result of a `goto` that failed with a network error, from what failed where."""
    if "net::ERR_" not in str(exc):
        raise exc
    failure = await watch.failure(first_line(exc))
    if "ERR_ABORTED" in str(exc) and not await watch.renderer_alive(RENDERER_PROBE_S):
        target = url if failure is None else failure.url
        failure = FailedNavigation(error=first_line(exc), url=target, renderer_died=True)
    if failure is None:
        raise exc
    if failure.answered_without_page and failure.status in NO_CONTENT:
        return await _no_content(failure.url, failure.status, options, max_bytes)
    code, message = classify_navigation(failure)
    if failure.challenged:  # the site answered: its status goes on the result
        return failed(code, message, final_url=failure.url, status_code=failure.status)
    raise PageFailedError(code, message) from exc


def _made(response: Response, reading: Reading) -> bool:
    """Whether `response` is the answer that made the document read (not one before it)."""
    same_url = response.url.partition("#")[0] == reading.url.partition("#")[0]
    return same_url and reading.status in {None, response.status}


def _left_the_web(reading: Reading) -> PageContent | None:
    """The page's scripts took it to a URL of no scheme the URL policy allows (`data:`,
    `about:`, `blob:`...): what it shows there is no content of a crawled URL."""
    scheme = reading.url.partition(":")[0].lower()
    if scheme in ALLOWED_SCHEMES:
        return None
    message = f"the page navigated to a {scheme}: URL, which the URL policy does not allow"
    return failed(ErrorCode.BLOCKED, message, final_url=f"{scheme}:")  # a data: URL is content


def _refused(watch: NavigationWatch, reading: Reading) -> PageContent | None:
    """The document is the egress proxy's 403 for a target it refused."""
    reason = watch.refused(reading.url) if reading.status == HTTP_FORBIDDEN else None
    if reason is None:
        return None
    return failed(ErrorCode.BLOCKED, f"{reading.url}: refused by the URL policy ({reason})")


async def _no_content(url: str, status: int, options: CrawlOptions, max_bytes: int) -> PageContent:
    """The server answered the navigation with nothing to show (204, 205): an empty page."""
    return await _content(status, None, url, "", _Pictures(), options, max_bytes)


async def _content(
    status: int | None,
    answer: Response | None,
    final_url: str,
    html: str,
    pictures: _Pictures,
    options: CrawlOptions,
    max_bytes: int,
    follow: FollowRules | None = None,
) -> PageContent:
    """The result of a document read: `status` of the answer that made it, `answer` itself
    when known (for `Retry-After` and the marks of a challenge page)."""
    return await page_content(
        status=status,
        final_url=final_url,
        html=html,
        options=options,
        max_bytes=max_bytes,
        screenshot=pictures.screenshot,
        pdf=pictures.pdf,
        actions=pictures.actions,
        follow=follow,
        retry_after=answer.headers.get("retry-after") if answer is not None else None,
        headers=answer.headers if answer is not None else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pictures:
    """What the browser took of the page, base64: a screenshot, a printed PDF."""

    screenshot: str | None = None
    pdf: str | None = None
    actions: ActionsOutput | None = None


def proxy_failure(response: Response | None) -> PageContent | None:
    """The egress proxy answered instead of the target: it refused it or could not reach it."""
    if response is None:
        return None
    return proxy_refusal(response.url, response.status, response.headers)
