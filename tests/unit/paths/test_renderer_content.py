"""The renderer's part in documents and challenge pages, on fakes."""

from __future__ import annotations

from fpdf import FPDF
from inmemory import FakeBrowser, FakeFetcher, answer
from prometheus_client import CollectorRegistry

from service.content.page import PageContent, failed
from service.contracts import CrawlOptions, ErrorCode
from service.http.static import StaticAnswer
from service.metrics import Metrics
from service.paths import HostRenderMemory, PageRenderer, PageToRender

URL = "http://site.test/a"

CHALLENGE = """<html><head><title>Just a moment...</title></head><body>
<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1"></script></body></html>"""


def _pdf_answer(pages: int, *, truncated: bool = False) -> StaticAnswer:
    document = FPDF()
    document.set_title("Manual")
    document.set_font("helvetica", size=12)
    for number in range(1, pages + 1):
        document.add_page()
        document.cell(0, 10, f"Page {number}")
    return StaticAnswer(
        url="http://site.test/files/manual.pdf",
        status=200,
        media_type="application/pdf",
        kind="pdf",
        body="",
        truncated=truncated,
        retry_after=None,
        attachment=True,
        data=bytes(document.output()),
    )


class DownloadingBrowser(FakeBrowser):
    """A browser that meets a download where the page should be."""

    async def render(self, page: PageToRender, timeout_s: float) -> PageContent:
        self.pages.append(page)
        self.calls.append(timeout_s)
        return failed(ErrorCode.DOWNLOAD, f"{self.url}: the answer is not a page (a download)")


async def _render(fetcher, options: CrawlOptions, browser=None, *, max_pdf_pages: int = 100):
    metrics = Metrics(CollectorRegistry())
    memory = HostRenderMemory(threshold=1)
    browser = browser or FakeBrowser()
    renderer = PageRenderer(fetcher, browser, memory, metrics, max_pdf_pages=max_pdf_pages)
    page = PageToRender(
        url=URL, options=options, run_id="run", host="site.test", max_bytes=10**7, follow=None
    )
    content = await renderer.render(page, timeout_s=10)
    return content, browser, metrics, memory


def _escalations(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("crawl_render_escalations_total", {"reason": reason})
    return value or 0.0


async def test_http_reads_a_pdf_with_its_pages_and_metadata():
    content, _, _, _ = await _render(FakeFetcher(_pdf_answer(3)), CrawlOptions(render="http"))
    assert (content.ok, content.rendered_by, content.title) == (True, "http", "Manual")
    assert content.markdown == "Page 1\n\nPage 2\n\nPage 3"
    assert content.document is not None
    assert (content.document.page_count, content.document.pages_read) == (3, 3)


async def test_pages_beyond_the_limit_are_cut_with_truncated():
    content, _, _, _ = await _render(
        FakeFetcher(_pdf_answer(4)), CrawlOptions(render="http"), max_pdf_pages=2
    )
    assert content.markdown == "Page 1\n\nPage 2"
    assert content.truncated
    assert content.document is not None
    assert (content.document.page_count, content.document.pages_read) == (4, 2)


async def test_a_pdf_cut_at_the_byte_cap_is_too_large():
    content, _, _, _ = await _render(
        FakeFetcher(_pdf_answer(1, truncated=True)), CrawlOptions(render="http")
    )
    assert content.error is not None
    assert content.error.code == ErrorCode.TOO_LARGE


async def test_auto_keeps_a_pdf_on_http():
    content, browser, _, _ = await _render(FakeFetcher(_pdf_answer(1)), CrawlOptions(render="auto"))
    assert (content.ok, content.rendered_by, browser.calls) == (True, "http", [])


async def test_the_browser_path_fetches_a_download_that_is_a_pdf_over_http():
    """The browser cannot show a PDF: the renderer fetches it as the HTTP path does."""
    fetcher = FakeFetcher(_pdf_answer(2))
    content, browser, _, _ = await _render(fetcher, CrawlOptions(), DownloadingBrowser())
    assert (content.ok, content.rendered_by, len(browser.calls), fetcher.fetched) == (
        True,
        "browser",
        1,
        1,
    )
    assert content.markdown == "Page 1\n\nPage 2"


async def test_a_download_that_is_no_pdf_stays_a_download():
    fetcher = FakeFetcher(answer(URL, kind="other"))
    content, _, _, _ = await _render(fetcher, CrawlOptions(), DownloadingBrowser())
    assert content.error is not None
    assert (content.error.code, content.rendered_by) == (ErrorCode.DOWNLOAD, "browser")


async def test_http_calls_a_challenge_page_blocked_by_site_and_keeps_retry_after():
    challenge = StaticAnswer(
        url=URL,
        status=503,
        media_type="text/html",
        kind="html",
        body=CHALLENGE,
        truncated=False,
        retry_after="7",
        attachment=False,
        headers={"cf-mitigated": "challenge"},
    )
    content, _, _, _ = await _render(FakeFetcher(challenge), CrawlOptions(render="http"))
    assert content.error is not None
    assert content.error.code == ErrorCode.BLOCKED_BY_SITE
    assert content.error.message.startswith("HTTP 503: Cloudflare challenge (title")
    assert "header cf-mitigated: challenge" in content.error.message
    assert (content.ok, content.status_code, content.retry_after_s) == (False, 503, 7.0)


async def test_auto_sends_a_challenge_to_the_browser_and_learns_the_host():
    challenge = answer(URL, CHALLENGE, status=403)
    _, browser, metrics, memory = await _render(FakeFetcher(challenge), CrawlOptions(render="auto"))
    assert (len(browser.calls), _escalations(metrics, "blocked_by_site")) == (1, 1)
    assert memory.straight_to_browser("site.test")


async def test_auto_prints_pdfs_in_the_browser():
    options = CrawlOptions(render="auto", formats=("pdf",))
    _, browser, metrics, _ = await _render(FakeFetcher(), options)
    assert (len(browser.calls), _escalations(metrics, "pdf_format")) == (1, 1)
