"""The content model both render paths give (`PageContent`), and its assembly from a
document's HTML, whichever path fetched it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Final

import pydantic_core
from pydantic import ConfigDict, Field, JsonValue, SkipValidation

from service.content.blocking import challenge_seen
from service.content.extract import Extracted, HtmlTooComplexError, Outlinks, extract
from service.content.offload import ContentBudgetError, ContentFailedError, offloaded
from service.content.schema_extract import extractor_for
from service.content.shaping import Shaping
from service.contracts import ErrorCode, Format, PageError, PageFields
from service.errors import PermanentError

if TYPE_CHECKING:
    from service.content.extract import FollowRules
    from service.contracts import CrawlOptions
    from service.contracts_actions import ActionsOutput

HTTP_ERROR_FROM: Final = 400

CACHE_HEADERS: Final = frozenset({"cache-control", "etag", "last-modified"})
"""The answer's headers the page cache reads (whether to store, how to revalidate)."""


class PageContent(PageFields):
    """What a page gave, before it becomes a `PageResult`: the result's `PageFields`, and the
    fetcher's own (`FETCHER_ONLY`), which the wire result does not carry."""

    model_config = ConfigDict(frozen=True, validate_by_name=True, arbitrary_types_allowed=True)

    json_data: SkipValidation[JsonValue] = Field(default=None, alias="json")
    """As `PageFields.json_data`, validated once, on the `PageResult` (an `extract` of
    thousands of objects takes milliseconds to walk)."""
    retry_after_s: float | None = None
    """Seconds the server asked to wait before trying again (`Retry-After`), if it said."""
    outlinks: Outlinks | None = None
    """The links a deep crawl may follow from the page (when it asked)."""
    source_html: str | None = None
    """The document the outputs were extracted from, whole (None when it was cut short):
    what the page cache stores, so a later request derives its own outputs from it."""
    cache_headers: Mapping[str, str] = Field(default_factory=dict)
    """The answer's `Cache-Control`, `ETag` and `Last-Modified` (lower-case names)."""

    def result_fields(self) -> dict[str, object]:
        """The fields that go onto the `PageResult` as they are: its `PageFields`, by the
        names the result itself declares (it extends `PageFields`)."""
        return {name: getattr(self, name) for name in PageFields.model_fields}

    def replaced(self, **changes: object) -> PageContent:
        """This content with `changes` (names of its fields; another name is a TypeError)."""
        unknown = changes.keys() - type(self).model_fields.keys()
        if unknown:
            raise TypeError(f"PageContent has no field {sorted(unknown)}")
        return self.model_copy(update=changes)


FETCHER_ONLY: Final = frozenset({"retry_after_s", "outlinks", "source_html", "cache_headers"})
"""`PageContent` fields the fetcher uses and the wire result does not carry: the retry's
wait, the links a deep crawl follows (they go to the frontier record), what the page cache
stores. Any other field belongs in `PageFields` (`tests/unit/content/test_page_model.py`)."""


class JsonTooLargeError(PermanentError):
    """A page's `json` alone is larger than the result may be."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(
            f"the result is larger than the worker's {max_bytes:,} bytes (`json` {size:,} bytes)"
        )
        self.size = size
        self.max_bytes = max_bytes

    def __reduce__(self) -> tuple[type[JsonTooLargeError], tuple[int, int]]:
        return type(self), (self.size, self.max_bytes)


def failed(code: ErrorCode, message: str, **fields: object) -> PageContent:
    return PageContent(ok=False, error=PageError(code=code, message=message), **fields)


async def page_content(
    *,
    status: int | None,
    final_url: str,
    html: str,
    options: CrawlOptions,
    max_bytes: int,
    screenshot: str | None = None,
    pdf: str | None = None,
    actions: ActionsOutput | None = None,
    follow: FollowRules | None = None,
    retry_after: str | None = None,
    headers: Mapping[str, str] | None = None,
    truncated: bool = False,
) -> PageContent:
    """Extract what `options` asks for from a document's HTML, whichever path fetched it:
    `status` and `headers` (lower-case names) of the answer that made it, its `Retry-After`
    value, and whether the document was already cut short (`truncated`)."""
    kept_html, cut_html = cut(html, max_bytes)
    try:
        extracted, error = await offloaded(
            _extracted,
            kept_html or "",
            final_url,
            status,
            dict(headers or {}),
            options,
            follow,
            max_bytes,
        )
    except (HtmlTooComplexError, ContentBudgetError, JsonTooLargeError) as exc:
        return failed(ErrorCode.TOO_LARGE, str(exc), final_url=final_url, status_code=status)
    except ContentFailedError as exc:
        return failed(ErrorCode.INTERNAL, str(exc), final_url=final_url, status_code=status)
    markdown, cut_markdown = cut(extracted.markdown, max_bytes)
    text, cut_text = cut(extracted.text, max_bytes)
    too_big_shot = screenshot is not None and len(screenshot) > max_bytes
    too_big_pdf = pdf is not None and len(pdf) > max_bytes
    too_big_shots = actions is not None and sum(map(len, actions.screenshots)) > max_bytes
    if too_big_shots and actions is not None:
        actions = actions.model_copy(update={"screenshots": []})
    retry_after_s = parse_retry_after(retry_after) if error is not None else None
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
        pdf=None if too_big_pdf else pdf,
        json_data=extracted.json_data,
        structured_data=extracted.structured_data,
        actions=actions,
        truncated=truncated
        or cut_html
        or cut_markdown
        or cut_text
        or too_big_shot
        or too_big_pdf
        or too_big_shots,
        retry_after_s=retry_after_s,
        outlinks=extracted.outlinks if error is None else None,
        source_html=None if cut_html or truncated else html,
        cache_headers={
            name: value for name, value in (headers or {}).items() if name in CACHE_HEADERS
        },
    )


def _extracted(
    html: str,
    final_url: str,
    status: int | None,
    headers: Mapping[str, str],
    options: CrawlOptions,
    follow: FollowRules | None,
    max_bytes: int,
) -> tuple[Extracted, PageError | None]:
    """The outputs of the document, and the error its status makes of it: a challenge or block
    page is `blocked_by_site` (with what was seen), other refusals `http_error`.

    Raises JsonTooLargeError when the `json` alone is larger than `max_bytes` (it is not sent
    back to the worker: an `extract` can copy a page thousands of times)."""
    extracted = extract(
        html,
        base_url=final_url,
        formats=options.formats,
        follow=follow,
        shaping=Shaping.from_options(options),
        extractor=extractor_for(options.extract),
    )
    if extracted.json_data is not None:
        size = len(pydantic_core.to_json(extracted.json_data))
        if size > max_bytes:
            raise JsonTooLargeError(size, max_bytes)
    if status is None or status < HTTP_ERROR_FROM:
        return extracted, None
    seen = challenge_seen(status, headers, html)
    if seen is not None:
        message = f"HTTP {status}: {seen}"
        return extracted, PageError(code=ErrorCode.BLOCKED_BY_SITE, message=message)
    return extracted, PageError(code=ErrorCode.HTTP_ERROR, message=f"HTTP {status}")


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
