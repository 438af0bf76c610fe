"""Path choice per page: `browser`, `http` and `auto` with its escalations, on fakes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from _jsapps import js_page, static_page
from inmemory import FakeBrowser, FakeFetcher, answer
from prometheus_client import CollectorRegistry

from service.content.page import failed
from service.contracts import CrawlOptions, ErrorCode
from service.metrics import Metrics
from service.paths import HostRenderMemory, PageRenderer, PageToRender

if TYPE_CHECKING:
    from service.http.static import StaticAnswer

URL = "http://site.test/a"


def _answer(body: str, *, kind: str = "html", status: int = 200) -> StaticAnswer:
    return answer(URL, body, kind=kind, status=status)


async def _render(fetcher, options: CrawlOptions, memory=None, metrics=None):
    metrics = Metrics(CollectorRegistry()) if metrics is None else metrics
    memory = HostRenderMemory() if memory is None else memory
    browser = FakeBrowser()
    renderer = PageRenderer(fetcher, browser, memory, metrics)
    page = PageToRender(
        url=URL, options=options, run_id="run", host="site.test", max_bytes=10**7, follow=None
    )
    content = await renderer.render(page, timeout_s=10)
    return content, browser, metrics


def _escalations(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("crawl_render_escalations_total", {"reason": reason})
    return value or 0.0


async def test_auto_keeps_a_static_page_from_http():
    fetcher = FakeFetcher(_answer(static_page(1)))
    content, browser, metrics = await _render(fetcher, CrawlOptions(render="auto"))
    assert (content.ok, content.rendered_by, browser.calls) == (True, "http", [])
    assert "Static story 1" in (content.markdown or "")
    assert metrics.registry.get_sample_value("crawl_pages_rendered_total", {"path": "http"}) == 1


async def test_auto_sends_an_app_shell_to_the_browser_and_counts_why():
    content, browser, metrics = await _render(
        FakeFetcher(_answer(js_page("shell", 1))), CrawlOptions(render="auto")
    )
    assert (content.rendered_by, content.markdown, len(browser.calls)) == (
        "browser",
        "from the browser",
        1,
    )
    assert _escalations(metrics, "empty_root") == 1


async def test_auto_goes_straight_to_the_browser_for_screenshots_and_learned_hosts():
    memory = HostRenderMemory(threshold=2)
    fetcher = FakeFetcher(_answer(js_page("widget", 1)))
    options = CrawlOptions(render="auto")
    for _ in range(2):
        await _render(fetcher, options, memory)
    content, browser, metrics = await _render(fetcher, options, memory)
    assert (fetcher.fetched, content.rendered_by, _escalations(metrics, "host_learned")) == (
        2,
        "browser",
        1,
    )
    shot = CrawlOptions(render="auto", formats=("screenshot",))
    _, browser, metrics = await _render(fetcher, shot, memory)
    assert (fetcher.fetched, len(browser.calls)) == (2, 1)
    assert _escalations(metrics, "screenshot") == 1


async def test_auto_escalates_when_wait_for_is_absent_or_only_the_browser_can_judge_it():
    page = _answer(static_page(2))
    found, _, _ = await _render(FakeFetcher(page), CrawlOptions(render="auto", wait_for="main h1"))
    assert found.rendered_by == "http"
    for selector in ("#late", "text=Static story"):
        options = CrawlOptions(render="auto", wait_for=selector)
        content, _, metrics = await _render(FakeFetcher(page), options)
        assert (content.rendered_by, _escalations(metrics, "wait_for")) == ("browser", 1)


async def test_auto_escalates_other_content_types_but_keeps_text_and_fetch_failures():
    pdf, _, metrics = await _render(
        FakeFetcher(_answer("", kind="other")), CrawlOptions(render="auto")
    )
    assert (pdf.rendered_by, _escalations(metrics, "content_type")) == ("browser", 1)
    text, browser, _ = await _render(
        FakeFetcher(_answer("just text", kind="text")), CrawlOptions(render="auto")
    )
    assert (text.rendered_by, text.markdown, browser.calls) == ("http", "```\njust text\n```", [])
    blocked = failed(ErrorCode.BLOCKED, "no")
    refused, browser, _ = await _render(FakeFetcher(blocked), CrawlOptions(render="auto"))
    assert (refused.rendered_by, refused.error, browser.calls) == ("http", blocked.error, [])


async def test_http_never_uses_the_browser_and_says_what_it_cannot_do():
    options = CrawlOptions(render="http")
    shell, browser, _ = await _render(FakeFetcher(_answer(js_page("shell", 1))), options)
    assert (shell.ok, shell.rendered_by, browser.calls) == (True, "http", [])
    cases = {
        "timeout": CrawlOptions(render="http", wait_for="#late"),
        "invalid_selector": CrawlOptions(render="http", wait_for="text=x"),
    }
    for code, opts in cases.items():
        content, _, _ = await _render(FakeFetcher(_answer(static_page(1))), opts)
        assert content.error is not None
        assert content.error.code.value == code
    pdf, _, _ = await _render(FakeFetcher(_answer("", kind="other")), options)
    assert pdf.error is not None
    assert (pdf.error.code.value, pdf.status_code) == ("download", 200)


async def test_browser_is_the_default_path():
    content, browser, _ = await _render(FakeFetcher(), CrawlOptions())
    assert (content.rendered_by, len(browser.calls)) == ("browser", 1)
