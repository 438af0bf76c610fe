"""Render one URL in a pooled page and turn it into content: every step under one deadline."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from service.contracts import ErrorCode, Format, Links, PageError, PageMetadata, PageResult
from service.crawling._deadline import MIN_STEP_S, StepDeadline
from service.crawling._navigation import NavigationWatch
from service.crawling._settle import Reading, SettleLimits, read_settled
from service.crawling.errors import (
    FailedNavigation,
    PageFailedError,
    classify_browser_error,
    classify_navigation,
    first_line,
)
from service.crawling.extraction import FollowRules, HtmlTooComplexError, Outlinks, extract
from service.errors import BrowserUnavailableError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from playwright.async_api import Page, Response

    from service.contracts import CrawlOptions, RenderedBy
    from service.crawling.browser import RequestContext
    from service.crawling.refusals import RefusedTargets

EXTRACTION_SHARE: Final = 0.25
"""Part of the page deadline kept back for content, extraction and screenshot."""

HTTP_ERROR_FROM: Final = 400

HTTP_FORBIDDEN: Final = 403
"""The egress proxy's status for a target the URL policy forbids."""

HTTP_BAD_GATEWAY: Final = 502
"""The egress proxy's status for a target it could not resolve or reach."""

NO_CONTENT: Final = frozenset({204, 205})
"""Statuses that answer a navigation with nothing to show: an ok result without content."""

RENDERER_PROBE_S: Final = 2.0
"""Deadline of the one round trip that tells an aborted navigation of a live page (a download,
a redirect to javascript:) from one whose renderer was killed under it."""

GOTO_ATTEMPTS: Final = 2
"""Tries of `goto` when a navigation the previous document started interrupts it."""

BLOCKED_HEADER: Final = "x-crawlstream-blocked"
"""Set by the egress proxy on its 403 for a target the URL policy forbids."""

ERROR_HEADER: Final = "x-crawlstream-error"
"""Set by the egress proxy when a target could not be resolved or reached."""

_PROXY_CODES: Final = frozenset({ErrorCode.DNS, ErrorCode.CONNECTION, ErrorCode.TIMEOUT})

_INTERRUPTED: Final = "interrupted by another navigation"


@dataclass(frozen=True, slots=True, kw_only=True)
class PageContent:
    """What a page gave, before it becomes a `PageResult`."""

    ok: bool
    final_url: str | None = None
    status_code: int | None = None
    error: PageError | None = None
    title: str | None = None
    markdown: str | None = None
    text: str | None = None
    html: str | None = None
    links: Links | None = None
    metadata: PageMetadata | None = None
    screenshot: str | None = None
    truncated: bool = False
    retry_after_s: float | None = None
    """Seconds the server asked to wait before trying again (`Retry-After`), if it said."""
    outlinks: Outlinks | None = None
    """The links a deep crawl may follow from the page (when it asked)."""
    rendered_by: RenderedBy | None = None
    """The path that fetched the page (None: it was never fetched)."""

    def result_fields(self) -> dict[str, object]:
        """The fields that go onto the `PageResult` as they are."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name in PageResult.model_fields
        }


def failed(code: ErrorCode, message: str, **fields: object) -> PageContent:
    return PageContent(ok=False, error=PageError(code=code, message=message), **fields)  # type: ignore[arg-type]


async def fetch_page(
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
    reading = await read_settled(page, watch, options, navigation, deadline, settle)
    answer = response if response is not None and _made(response, reading) else None
    refused = proxy_failure(answer) or _refused(watch, reading)
    if refused is not None:
        return refused
    shot = base64.b64encode(reading.screenshot).decode() if reading.screenshot else None
    return await _content(
        reading.status, answer, reading.url, reading.html, shot, options, max_bytes, follow
    )


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


def _refused(watch: NavigationWatch, reading: Reading) -> PageContent | None:
    """The document is the egress proxy's 403 for a target it refused."""
    reason = watch.refused(reading.url) if reading.status == HTTP_FORBIDDEN else None
    if reason is None:
        return None
    return failed(ErrorCode.BLOCKED, f"{reading.url}: refused by the URL policy ({reason})")


async def _no_content(url: str, status: int, options: CrawlOptions, max_bytes: int) -> PageContent:
    """The server answered the navigation with nothing to show (204, 205): an empty page."""
    return await _content(status, None, url, "", None, options, max_bytes)


async def _content(
    status: int | None,
    answer: Response | None,
    final_url: str,
    html: str,
    screenshot: str | None,
    options: CrawlOptions,
    max_bytes: int,
    follow: FollowRules | None = None,
) -> PageContent:
    """The result of a document read: `status` of the answer that made it, `answer` itself
    when known (for `Retry-After`)."""
    return await page_content(
        status=status,
        final_url=final_url,
        html=html,
        options=options,
        max_bytes=max_bytes,
        screenshot=screenshot,
        follow=follow,
        retry_after=answer.headers.get("retry-after") if answer is not None else None,
    )


async def page_content(
    *,
    status: int | None,
    final_url: str,
    html: str,
    options: CrawlOptions,
    max_bytes: int,
    screenshot: str | None = None,
    follow: FollowRules | None = None,
    retry_after: str | None = None,
    truncated: bool = False,
) -> PageContent:
    """Extract what `options` asks for from a document's HTML, whichever path fetched it:
    `status` of the answer that made it, its `Retry-After` value, and whether the document
    was already cut short (`truncated`)."""
    kept_html, cut_html = cut(html, max_bytes)
    try:
        extracted = await asyncio.to_thread(
            extract, kept_html or "", base_url=final_url, formats=options.formats, follow=follow
        )
    except HtmlTooComplexError as exc:
        return failed(ErrorCode.TOO_LARGE, str(exc), final_url=final_url)
    markdown, cut_markdown = cut(extracted.markdown, max_bytes)
    text, cut_text = cut(extracted.text, max_bytes)
    too_big_shot = screenshot is not None and len(screenshot) > max_bytes
    error = None
    retry_after_s = None
    if status is not None and status >= HTTP_ERROR_FROM:
        error = PageError(code=ErrorCode.HTTP_ERROR, message=f"HTTP {status}")
        retry_after_s = parse_retry_after(retry_after)
    return PageContent(
        ok=error is None,
        final_url=final_url,
        status_code=status,
        error=error,
        title=extracted.title,
        markdown=markdown,
        text=text,
        html=kept_html if Format.HTML in options.formats else None,
        links=extracted.links,
        metadata=extracted.metadata,
        screenshot=None if too_big_shot else screenshot,
        truncated=truncated or cut_html or cut_markdown or cut_text or too_big_shot,
        retry_after_s=retry_after_s,
        outlinks=extracted.outlinks if error is None else None,
    )


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from `now` that a `Retry-After` value asks for (delay-seconds or HTTP-date);
    None when absent or unreadable, 0 for a date already past."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def proxy_failure(response: Response | None) -> PageContent | None:
    """The egress proxy answered instead of the target: it refused it or could not reach it."""
    if response is None:
        return None
    return proxy_refusal(response.url, response.status, response.headers)


def proxy_refusal(url: str, status: int, headers: Mapping[str, str]) -> PageContent | None:
    """The result when the answer to a request for `url` is the egress proxy's own: only a
    plain-http answer can be (the proxy strips its verdict headers from every site's answer it
    forwards; an https answer comes through a tunnel, from the site itself). See
    `proxy_verdict` for what the verdict looks like."""
    if urlsplit(url).scheme.lower() != "http":
        return None
    return proxy_verdict(url, status, headers)


def proxy_verdict(url: str, status: int, headers: Mapping[str, str]) -> PageContent | None:
    """The result when `headers` (lower-case names, or a case-insensitive mapping) carry the
    egress proxy's verdict on `url`: 403 with `x-crawlstream-blocked` for a target the policy
    forbids, 502 with `x-crawlstream-error` for one it could not resolve or reach. Use it on
    answers only the proxy gives (plain http, a CONNECT's answer)."""
    if status == HTTP_FORBIDDEN and BLOCKED_HEADER in headers:
        return failed(ErrorCode.BLOCKED, f"{url}: {headers[BLOCKED_HEADER]}")
    code = headers.get(ERROR_HEADER)
    if status == HTTP_BAD_GATEWAY and code is not None and code in _PROXY_CODES:
        return failed(ErrorCode(code), f"{code} error for {url}")
    return None


def cut(value: str | None, max_bytes: int) -> tuple[str | None, bool]:
    """`value` within `max_bytes` of UTF-8 (cut on a character boundary), and whether it was cut."""
    if value is None or len(value) * 4 <= max_bytes:
        return value, False
    encoded = value.encode()
    if len(encoded) <= max_bytes:
        return value, False
    return encoded[:max_bytes].decode(errors="ignore"), True
