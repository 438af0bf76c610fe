"""One page by the request's `render` option: the browser, HTTP, or HTTP first (`auto`).

`auto` sends a page to the browser at once when the request asks for what only the browser
does (a screenshot or PDF, page actions, a locale, time zone, geolocation, viewport or device,
scripts off: `browser_asked`) or its host keeps needing the browser (`learner.py`); otherwise
it fetches the page over HTTP and keeps that answer unless it needs scripts
(`escalation_reason`). A failure of the HTTP fetch itself
(blocked, dns, connection, timeout) is kept: the browser goes through the same proxy and
policy and would meet the same. Whichever path produced the result is in `rendered_by`.
"""

from __future__ import annotations

import html as html_lib
import time
from typing import TYPE_CHECKING, Final, Protocol

from service.content.blocking import challenge_seen
from service.content.document import DEFAULT_MAX_PDF_PAGES, pdf_content
from service.content.offload import ContentBudgetError, ContentFailedError, offloaded
from service.content.page import HTTP_ERROR_FROM, PageContent, failed, page_content
from service.content.shell import selector_present, shell_reason
from service.contracts import ErrorCode, Format
from service.contracts_identity import BROWSER_ONLY_FIELDS
from service.http.identity import HttpIdentity
from service.paths.learner import HostRenderMemory

if TYPE_CHECKING:
    from service.content.extract import FollowRules
    from service.contracts import CrawlOptions, RenderedBy
    from service.http.static import StaticAnswer, StaticFetcher
    from service.metrics import Metrics
    from service.paths.browser_path import PageToRender
    from service.settings import Settings

BROWSER_FORMATS: Final = ((Format.SCREENSHOT, "screenshot"), (Format.PDF, "pdf_format"))
"""Formats only the browser makes, and the escalation reason each counts under."""

MIN_BROWSER_S: Final = 1.0
"""Least time an escalated page gets in the browser, whatever the HTTP fetch took."""

LEARNED_REASONS: Final = frozenset(
    {"wait_for", "noscript", "empty_root", "empty_main", "thin_text", "blocked_by_site"}
)
"""Escalations that say something about the host's pages (not about the request or a file)."""


def browser_asked(options: CrawlOptions) -> str | None:
    """Why `auto` sends a page straight to the browser, from the request alone: a format only
    it makes, page actions, an identity option only it honours (None: try HTTP first). Pure."""
    for format_, format_reason in BROWSER_FORMATS:
        if format_ in options.formats:
            return format_reason
    if options.actions:
        return "actions"
    browser_only = any(getattr(options, name) is not None for name in BROWSER_ONLY_FIELDS)
    return "identity" if browser_only or not options.javascript else None


def escalation_reason(answer: StaticAnswer, wait_for: str | None) -> str | None:
    """Why an HTTP answer is not the page the browser would give (None: keep it). Pure.

    A bot challenge goes to the browser, which runs its script as any browser does (a
    challenge that wants more stays `blocked_by_site` there too)."""
    if answer.kind == "html" and challenge_seen(answer.status, answer.headers, answer.body):
        return "blocked_by_site"
    if answer.kind == "pdf":
        return None  # read here; the browser would fetch it the same way
    if answer.status >= HTTP_ERROR_FROM or answer.attachment:
        return None  # an error status or a download: the browser gets the same answer
    if answer.kind == "other":
        return "content_type"
    if wait_for is not None and selector_present(_as_html(answer), wait_for) is not True:
        return "wait_for"  # absent, or a selector only the browser can judge
    return shell_reason(answer.body) if answer.kind == "html" else None


class Browser(Protocol):
    """The browser path (`browser_path.BrowserPath`)."""

    async def render(self, page: PageToRender, timeout_s: float) -> PageContent: ...


class PageRenderer:
    """Renders pages by path; counts pages per path and escalations per reason."""

    def __init__(
        self,
        fetcher: StaticFetcher,
        browser: Browser,
        memory: HostRenderMemory,
        metrics: Metrics,
        *,
        max_pdf_pages: int = DEFAULT_MAX_PDF_PAGES,
    ) -> None:
        self._fetcher = fetcher
        self._browser_path = browser
        self._memory = memory
        self._metrics = metrics
        self._max_pdf_pages = max_pdf_pages

    @classmethod
    def from_settings(
        cls, fetcher: StaticFetcher, browser: Browser, settings: Settings, metrics: Metrics
    ) -> PageRenderer:
        memory = HostRenderMemory.from_settings(settings)
        return cls(fetcher, browser, memory, metrics, max_pdf_pages=settings.max_pdf_pages)

    async def render(self, page: PageToRender, timeout_s: float) -> PageContent:
        """The page's content, tagged with the path that produced it."""
        if page.options.render == "browser":
            return await self._browser(page, timeout_s)
        if page.options.render == "http":
            return self._by("http", await self._static(await self._fetch(page, timeout_s), page))
        return await self._auto(page, timeout_s)

    async def _auto(self, page: PageToRender, timeout_s: float) -> PageContent:
        host = page.host
        asked = browser_asked(page.options)
        if asked is not None:
            return await self._escalate(asked, page, timeout_s)
        if self._memory.straight_to_browser(host):
            return await self._escalate("host_learned", page, timeout_s)
        started = time.monotonic()
        answer = await self._fetch(page, timeout_s)
        if isinstance(answer, PageContent):
            return self._by("http", answer)
        try:
            reason = await offloaded(escalation_reason, answer, page.options.wait_for)
        except (ContentBudgetError, ContentFailedError) as exc:
            return self._by("http", _not_judged(exc, answer))
        if reason is None:
            if answer.status < HTTP_ERROR_FROM:
                self._memory.static_sufficed(host)
            return self._by("http", await self._static(answer, page))
        if reason in LEARNED_REASONS:
            self._memory.needed_browser(host)
        left_s = max(timeout_s - (time.monotonic() - started), MIN_BROWSER_S)
        return await self._escalate(reason, page, left_s)

    async def _escalate(self, reason: str, page: PageToRender, timeout_s: float) -> PageContent:
        self._metrics.render_escalations.labels(reason).inc()
        return await self._browser(page, timeout_s)

    async def _browser(self, page: PageToRender, timeout_s: float) -> PageContent:
        """The page in the browser; a download it cannot show is fetched as the HTTP path
        does (same proxy, same policy, redirects judged hop by hop) and kept if it is a PDF."""
        started = time.monotonic()
        content = await self._browser_path.render(page, timeout_s)
        if content.error is not None and content.error.code == ErrorCode.DOWNLOAD:
            left_s = max(timeout_s - (time.monotonic() - started), MIN_BROWSER_S)
            content = await self._document(page, left_s) or content
        return self._by("browser", content)

    async def _document(self, page: PageToRender, timeout_s: float) -> PageContent | None:
        """The PDF at the page's URL, fetched over HTTP; None when it is no PDF."""
        answer = await self._fetch(page, timeout_s)
        if isinstance(answer, PageContent):
            return (
                answer if answer.error is None or answer.error.code != ErrorCode.DOWNLOAD else None
            )
        return await self._static(answer, page) if answer.kind == "pdf" else None

    async def _fetch(self, page: PageToRender, timeout_s: float) -> StaticAnswer | PageContent:
        return await self._fetcher.fetch(
            page.url,
            timeout_s=timeout_s,
            max_bytes=page.max_bytes,
            identity=HttpIdentity.of(page.options, page.url),
        )

    async def _static(self, answer: StaticAnswer | PageContent, page: PageToRender) -> PageContent:
        return await static_content(
            answer, page.options, page.max_bytes, page.follow, max_pdf_pages=self._max_pdf_pages
        )

    def _by(self, path: RenderedBy, content: PageContent) -> PageContent:
        self._metrics.pages_rendered.labels(path).inc()
        return content.replaced(rendered_by=path)


async def static_content(
    answer: StaticAnswer | PageContent,
    options: CrawlOptions,
    max_bytes: int,
    follow: FollowRules | None,
    *,
    max_pdf_pages: int = DEFAULT_MAX_PDF_PAGES,
) -> PageContent:
    """The result of an HTTP answer, with the fields the browser path would give it."""
    if isinstance(answer, PageContent):
        return answer
    if answer.kind == "pdf":
        return await pdf_content(
            answer.data,
            final_url=answer.url,
            status=answer.status,
            options=options,
            max_bytes=max_bytes,
            max_pages=max_pdf_pages,
            cut_short=answer.truncated,
        )
    where = {"final_url": answer.url, "status_code": answer.status}
    if answer.attachment:
        return failed(ErrorCode.DOWNLOAD, f"{answer.url} is a file download", **where)
    if answer.kind == "other":
        message = f"{answer.url}: {answer.media_type} is neither HTML nor text (render `http`)"
        return failed(ErrorCode.DOWNLOAD, message, **where)
    html = _as_html(answer)
    missing = await _wait_for_missing(answer, html, options.wait_for)
    if missing is not None:
        return missing
    return await page_content(
        status=answer.status,
        final_url=answer.url,
        html=html,
        options=options,
        max_bytes=max_bytes,
        follow=follow,
        retry_after=answer.retry_after,
        headers=answer.headers,
        truncated=answer.truncated,
    )


def _not_judged(exc: ContentBudgetError | ContentFailedError, answer: StaticAnswer) -> PageContent:
    """The page whose HTML could not be judged (its `wait_for`, a shell) within the budget."""
    code = ErrorCode.TOO_LARGE if isinstance(exc, ContentBudgetError) else ErrorCode.INTERNAL
    return failed(code, str(exc), final_url=answer.url, status_code=answer.status)


async def _wait_for_missing(
    answer: StaticAnswer, html: str, selector: str | None
) -> PageContent | None:
    """The result of a page whose `wait_for` is not in its HTML (None: it is, or none)."""
    if selector is None or answer.status >= HTTP_ERROR_FROM:
        return None
    try:
        present = await offloaded(selector_present, html, selector)
    except (ContentBudgetError, ContentFailedError) as exc:
        return _not_judged(exc, answer)
    where = {"final_url": answer.url, "status_code": answer.status}
    if present is None:
        message = f"wait_for {selector!r} is not a CSS selector (render `http` checks CSS only)"
        return failed(ErrorCode.INVALID_SELECTOR, message, **where)
    if not present:
        message = f"wait_for {selector!r} is not in the static HTML (render `http` runs no scripts)"
        return failed(ErrorCode.TIMEOUT, message, **where)
    return None


def _as_html(answer: StaticAnswer) -> str:
    """The document a browser makes of the answer: plain text is shown in a `<pre>`."""
    if answer.kind == "text":
        return f"<html><head></head><body><pre>{html_lib.escape(answer.body)}</pre></body></html>"
    return answer.body
