"""The result of a URL that answered with a PDF, whichever path fetched it: its text as
markdown and text (pages in order, a blank line between them), its metadata, and
`document` saying how much was read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from service.content.offload import ContentBudgetError, ContentFailedError, budget_s, offloaded
from service.content.page import HTTP_ERROR_FROM, PageContent, cut, failed
from service.content.pdf import PdfUnreadableError, read_pdf
from service.contracts import (
    DocumentInfo,
    ErrorCode,
    Format,
    Links,
    PageMetadata,
    StructuredData,
)

if TYPE_CHECKING:
    from service.content.pdf import PdfText
    from service.contracts import CrawlOptions

PDF_TIME_SHARE: Final = 0.5
"""Share of `CRAWL_CONTENT_BUDGET` after which a PDF's pages stop being read: the pages read
by then are the result (`truncated`), rather than `too_large` at the budget."""

DEFAULT_MAX_PDF_PAGES: Final = 100
"""Pages read when the worker names no other limit (`CRAWL_MAX_PDF_PAGES`)."""


async def pdf_content(
    data: bytes,
    *,
    final_url: str,
    status: int,
    options: CrawlOptions,
    max_bytes: int,
    max_pages: int,
    cut_short: bool = False,
) -> PageContent:
    """The PDF in `data` (the answer at `final_url`, its `status`) as `options` asks for it;
    `cut_short` when the download stopped at the byte cap (a PDF cannot be read in part)."""
    where: dict[str, object] = {"final_url": final_url, "status_code": status}
    if status >= HTTP_ERROR_FROM:
        return failed(ErrorCode.HTTP_ERROR, f"HTTP {status}", **where)
    if cut_short:
        message = f"{final_url}: the PDF is larger than the worker's {max_bytes:,} bytes"
        return failed(ErrorCode.TOO_LARGE, message, **where)
    try:
        budget = budget_s()
        seconds = None if budget is None else budget * PDF_TIME_SHARE
        document = await offloaded(read_pdf, data, max_pages, max_bytes, seconds)
    except PdfUnreadableError as exc:
        return failed(ErrorCode.DOWNLOAD, f"{final_url}: {exc}", **where)
    except ContentBudgetError as exc:
        return failed(ErrorCode.TOO_LARGE, f"{final_url}: the PDF's {exc}", **where)
    except ContentFailedError as exc:
        return failed(ErrorCode.INTERNAL, f"{final_url}: {exc}", **where)
    return _content(document, final_url, status, options, max_bytes)


def _content(
    document: PdfText, final_url: str, status: int, options: CrawlOptions, max_bytes: int
) -> PageContent:
    wanted = frozenset(options.formats)
    text, cut_text = cut(document.text, max_bytes)
    info = DocumentInfo(
        title=document.title,
        author=document.author,
        page_count=document.page_count,
        pages_read=len(document.pages),
        text_layer=document.text_layer,
    )
    return PageContent(
        ok=True,
        final_url=final_url,
        status_code=status,
        title=document.title,
        markdown=text if Format.MARKDOWN in wanted else None,
        text=text if Format.TEXT in wanted else None,
        links=Links() if Format.LINKS in wanted else None,
        metadata=PageMetadata(title=document.title) if Format.METADATA in wanted else None,
        structured_data=StructuredData() if Format.STRUCTURED_DATA in wanted else None,
        document=info,
        truncated=document.truncated or cut_text,
    )
