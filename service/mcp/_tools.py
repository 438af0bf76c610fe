"""The tools: Firecrawl's names (firecrawl-mcp's), what each does for a model, and the
function answering it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from service.mcp import _jobs, _pages, _schemas
from service.mcp._render import TEXT_BUDGET_CHARS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from service.mcp._answer import Answer
    from service.mcp._calls import Call

_CUT: Final = (
    f"An answer longer than {TEXT_BUDGET_CHARS:,} characters is cut; its last line says how "
    "to get the rest."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    name: str
    title: str
    description: str
    schema: dict[str, Any]
    read_only: bool
    run: Callable[[Call, dict[str, Any]], Awaitable[Answer]]


TOOLS: Final = (
    ToolSpec(
        name="firecrawl_scrape",
        title="Scrape a page",
        description=(
            "Read one web page, rendered in a real browser, and return its content as markdown "
            "(by default the main content only), or the formats asked for: html, rawHtml, "
            "links, screenshot, structuredData, json (CSS selector schema). Browser actions "
            "(click, write, scroll, wait) can run first. Use it when you know the page's URL. "
            "For a site's list of URLs use firecrawl_map; for many pages of a site use "
            f"firecrawl_crawl; for a known list of URLs use firecrawl_batch_scrape. {_CUT}"
        ),
        schema=_schemas.SCRAPE,
        read_only=True,
        run=_pages.scrape,
    ),
    ToolSpec(
        name="firecrawl_map",
        title="List a site's URLs",
        description=(
            "List the URLs of a website (from its sitemap and the start page's links) without "
            "reading the pages: fast and cheap. Use it to find the page you need before "
            "firecrawl_scrape, or to choose includePaths for firecrawl_crawl; `search` keeps "
            f"URLs containing a word. Returns one URL per line. {_CUT}"
        ),
        schema=_schemas.MAP,
        read_only=True,
        run=_pages.site_map,
    ),
    ToolSpec(
        name="firecrawl_crawl",
        title="Start a crawl",
        description=(
            "Start crawling a website from a URL, following its links within the site, and "
            "return the crawl's id at once (it does not wait). Then call "
            "firecrawl_check_crawl_status with the id for its progress and documents. Bound it "
            "with limit (pages), includePaths/excludePaths and maxDiscoveryDepth: a whole site "
            "can be thousands of pages. Use firecrawl_scrape for one page, firecrawl_map to "
            "only list URLs."
        ),
        schema=_schemas.CRAWL,
        read_only=False,
        run=_jobs.crawl,
    ),
    ToolSpec(
        name="firecrawl_check_crawl_status",
        title="A crawl's status and documents",
        description=(
            "The status of a crawl started with firecrawl_crawl (scraping, completed, failed, "
            "cancelled), its counts (completed of total pages), and its documents done so far "
            "as markdown, as many as fit in one answer. When more documents are there, or come "
            "later while it runs, the answer ends with a `cursor`: call again with it for the "
            f"next ones. Poll every few seconds while the status is scraping. {_CUT}"
        ),
        schema=_schemas.JOB_STATUS,
        read_only=True,
        run=partial(_jobs.status, _jobs.CRAWL),
    ),
    ToolSpec(
        name="firecrawl_cancel_crawl",
        title="Cancel a crawl",
        description=(
            "Stop a crawl started with firecrawl_crawl: pages not fetched yet are dropped; the "
            "documents already done stay readable with firecrawl_check_crawl_status."
        ),
        schema=_schemas.JOB_ID,
        read_only=False,
        run=partial(_jobs.cancel, _jobs.CRAWL),
    ),
    ToolSpec(
        name="firecrawl_batch_scrape",
        title="Start scraping a list of URLs",
        description=(
            "Start scraping a list of known URLs (same options as firecrawl_scrape, under "
            "`options`) and return the batch's id at once. Then call "
            "firecrawl_check_batch_status with the id for the documents. Use it instead of "
            "many firecrawl_scrape calls when you have more than a few URLs."
        ),
        schema=_schemas.BATCH,
        read_only=False,
        run=_jobs.batch,
    ),
    ToolSpec(
        name="firecrawl_check_batch_status",
        title="A batch scrape's status and documents",
        description=(
            "The status of a batch started with firecrawl_batch_scrape, its counts and its "
            "documents done so far as markdown, paged with `cursor` like "
            f"firecrawl_check_crawl_status. {_CUT}"
        ),
        schema=_schemas.JOB_STATUS,
        read_only=True,
        run=partial(_jobs.status, _jobs.BATCH),
    ),
    ToolSpec(
        name="firecrawl_cancel_batch_scrape",
        title="Cancel a batch scrape",
        description="Stop a batch started with firecrawl_batch_scrape (URLs not done are dropped).",
        schema=_schemas.JOB_ID,
        read_only=False,
        run=partial(_jobs.cancel, _jobs.BATCH),
    ),
)
"""Every tool, in the order they are listed."""

BY_NAME: Final = {tool.name: tool for tool in TOOLS}
