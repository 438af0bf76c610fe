"""The content model both render paths give (`PageContent`), and its assembly from a
document's HTML, whichever path fetched it."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Final

from service.content.extract import HtmlTooComplexError, Outlinks, extract
from service.contracts import ErrorCode, Format, Links, PageError, PageMetadata, PageResult

if TYPE_CHECKING:
    from service.content.extract import FollowRules
    from service.contracts import CrawlOptions, RenderedBy

HTTP_ERROR_FROM: Final = 400


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


def cut(value: str | None, max_bytes: int) -> tuple[str | None, bool]:
    """`value` within `max_bytes` of UTF-8 (cut on a character boundary), and whether it was cut."""
    if value is None or len(value) * 4 <= max_bytes:
        return value, False
    encoded = value.encode()
    if len(encoded) <= max_bytes:
        return value, False
    return encoded[:max_bytes].decode(errors="ignore"), True
