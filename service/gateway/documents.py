"""A `PageResult` as Firecrawl's document: the formats asked, camelCase metadata. Pure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from service.contracts import ErrorCode
from service.gateway.actions import document_actions
from service.gateway.change_tracking import NAME as CHANGE_TRACKING
from service.gateway.change_tracking import document_tracking

if TYPE_CHECKING:
    from service.contracts import DocumentInfo, PageMetadata, PageResult, StructuredData
    from service.gateway.options import ScrapeChoices

BASE64_IMAGE: Final = re.compile(r"!\[[^\]]*\]\(data:image/[^)]*\)")
"""A Markdown image whose source is inline base64 data (`removeBase64Images`)."""

SCREENSHOT_PREFIX: Final = "data:image/png;base64,"
"""Firecrawl's self-hosted screenshots are data URLs (its cloud uploads them instead)."""

PDF_PREFIX: Final = "data:application/pdf;base64,"
"""The `pdf` format (an extension), as a data URL like screenshots."""

CACHE_HITS: Final = frozenset({"hit", "revalidated"})
"""`cache_state`s Firecrawl calls `hit`: the document came from the page cache (one the site
confirmed with a 304 too); every other is a `miss`."""

ERROR_MESSAGES: Final[dict[ErrorCode, str]] = {
    ErrorCode.BLOCKED_BY_SITE: (
        "The site answered with a bot challenge or block page ({message}); this cluster does "
        "not try to get past it (no stealth proxies, no CAPTCHA solving)"
    ),
    ErrorCode.ACTION_FAILED: "Action failed: {message}",
    ErrorCode.PROXY_ERROR: "Proxy error: the upstream proxy failed ({message})",
    ErrorCode.INVALID_SELECTOR: "Invalid selector: {message}",
}
"""Firecrawl-style wording of the codes it has its own messages for; the others are
`code: message`. Every one starts with the code, so a caller can match on it."""


def document(result: PageResult, choices: ScrapeChoices) -> dict[str, Any]:
    """The document of one result, with the formats of `choices` and the metadata."""
    out: dict[str, Any] = {}
    for name in choices.formats:
        value = _format(result, name, choices)
        if value is not None:
            out[name] = value
    if result.actions is not None:
        out["actions"] = document_actions(result.actions, SCREENSHOT_PREFIX)
    out["metadata"] = metadata(result)
    warnings = [w for w in (choices.warning, _document_warning(result)) if w]
    if warnings:
        out["warning"] = "; ".join(warnings)
    return out


def metadata(result: PageResult) -> dict[str, Any]:
    """Firecrawl's `metadata`: the page's own, plus where it came from and how it went."""
    out: dict[str, Any] = _page_metadata(result.metadata) if result.metadata else {}
    if result.title and "title" not in out:
        out["title"] = result.title
    out |= {
        "sourceURL": result.url,
        "url": result.final_url or result.url,
        "statusCode": result.status_code or 0,
        "scrapeId": result.result_id,
        "proxyUsed": "basic",
        "cacheState": "hit" if result.cache_state in CACHE_HITS else "miss",
    }
    if result.cached_at is not None:
        out["cachedAt"] = result.cached_at.isoformat().replace("+00:00", "Z")
    if result.document is not None:
        out |= _pdf_metadata(result.document)
    if result.error is not None:
        out["error"] = error_message(result.error.code, result.error.message)
    return out


def error_message(code: ErrorCode, message: str) -> str:
    """`metadata.error` of a failed page: `code: ...`, in Firecrawl's words where it has them."""
    template = ERROR_MESSAGES.get(code)
    text = message if template is None else template.format(message=message)
    return f"{code.value}: {text}"


def _pdf_metadata(info: DocumentInfo) -> dict[str, Any]:
    """A PDF's metadata as Firecrawl names it: `numPages` the pages read, `totalPages` the
    document's own, `contentType`; `title` and `author` from the document."""
    out: dict[str, Any] = {
        "contentType": "application/pdf",
        "numPages": info.pages_read,
        "totalPages": info.page_count,
    }
    if info.title:
        out["title"] = info.title
    if info.author:
        out["author"] = info.author
    return out


def _document_warning(result: PageResult) -> str | None:
    info = result.document
    if info is not None and not info.text_layer:
        return "the PDF is scanned (no text layer): no text was read (no OCR on this cluster)"
    if info is not None and info.pages_read < info.page_count:
        return f"the PDF's text stops after {info.pages_read} of {info.page_count} pages"
    if result.truncated:
        return "the content was cut at the cluster's result size limit"
    return None


def _page_metadata(page: PageMetadata) -> dict[str, Any]:
    out: dict[str, Any] = {
        key: value
        for key, value in (
            ("title", page.title),
            ("description", page.description),
            ("language", page.language),
        )
        if value
    }
    for key, value in page.open_graph.items():
        out[f"og{key[:1].upper()}{key[1:]}"] = value
    return out


def _format(result: PageResult, name: str, choices: ScrapeChoices) -> Any:  # noqa: ANN401
    if name in {"json", "structuredData", "pdf", CHANGE_TRACKING}:
        return _data_format(result, name)
    if name == "markdown":
        text = result.markdown or ""
        return BASE64_IMAGE.sub("", text) if choices.remove_base64_images else text
    if name in {"html", "rawHtml"}:
        return result.html or ""
    if name == "links":
        links = result.links
        return [*links.internal, *links.external] if links else []
    if name == "screenshot" and result.screenshot:
        return SCREENSHOT_PREFIX + result.screenshot
    return None


def _data_format(result: PageResult, name: str) -> Any:  # noqa: ANN401
    if name == "json":
        return result.json_data
    if name == CHANGE_TRACKING:
        return document_tracking(result.change_tracking)
    if name == "structuredData":
        return _structured(result.structured_data) if result.structured_data else None
    return PDF_PREFIX + result.pdf if result.pdf else None


def _structured(data: StructuredData) -> dict[str, Any]:
    return {"jsonLd": data.json_ld, "microdata": data.microdata, "openGraph": data.open_graph}
