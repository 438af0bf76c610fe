"""Firecrawl's per-page options -> the contract's identity, shaping, actions, proxy, extract
(pure), and the documents' json, actions, PDF metadata and error wording."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.contracts import DocumentInfo, ErrorCode, Format, PageError, PageResult, StructuredData
from service.contracts_actions import ActionsOutput
from service.gateway.actions import contract_actions
from service.gateway.documents import document, error_message
from service.gateway.errors import ApiError
from service.gateway.mapping import Limits, batch_plan, crawl_plan, scrape_plan
from service.gateway.options import ScrapeChoices
from service.gateway.page_options import MOBILE_DEVICE, accept_language

LIMITS = Limits(max_urls=100, max_crawl_pages=10_000, max_pages_per_host=4)
URL = "https://example.com/"

SELECTORS = {
    "base_selector": "li.product",
    "fields": [
        {"name": "title", "selector": "h2", "type": "text"},
        {"name": "link", "selector": "a", "type": "attribute", "attribute": "href"},
    ],
}


def options(**body):
    return scrape_plan({"url": URL, **body}, limits=LIMITS)[1].options


def refusal(**body) -> ApiError:
    with pytest.raises(ApiError) as raised:
        scrape_plan({"url": URL, **body}, limits=LIMITS)
    assert raised.value.status == 400
    return raised.value


def test_only_main_content_keeps_firecrawls_default_true_and_can_be_turned_off():
    assert options().only_main_content
    assert not options(onlyMainContent=False).only_main_content
    assert "onlyMainContent" in refusal(onlyMainContent="yes").message


def test_headers_and_tags_map_and_bad_ones_are_refused_by_their_firecrawl_name():
    got = options(headers={"X-Test": "1"}, includeTags=["main", ".a"], excludeTags=["nav"])
    assert got.headers == {"X-Test": "1"}
    assert got.include_tags == ("main", ".a")
    assert got.exclude_tags == ("nav",)
    error = refusal(headers={"Connection": "close"})
    assert error.body()["details"][0]["path"][0] == "headers"
    error = refusal(excludeTags=["div[[["])
    assert error.body()["details"][0]["path"][0] == "excludeTags"
    assert "headers" in refusal(headers={"x": 1}).message


def test_mobile_is_a_mobile_chromium_device():
    assert options(mobile=True).device == MOBILE_DEVICE
    assert options(mobile=False).device is None


def test_location_languages_set_the_locale_and_accept_language_country_is_a_warning():
    _, plan = scrape_plan(
        {"url": URL, "location": {"country": "DE", "languages": ["de-DE", "en"]}}, limits=LIMITS
    )
    assert plan.options.locale == "de-DE"
    assert plan.options.headers == {"Accept-Language": "de-DE,en;q=0.9"}
    assert plan.options.timezone is None
    assert plan.choices.warning is not None
    assert "location.country" in plan.choices.warning
    single = options(location={"languages": ["fr-FR"]})
    assert single.locale == "fr-FR"
    assert single.headers == {}
    own = options(headers={"accept-language": "x"}, location={"languages": ["de", "en"]})
    assert own.headers == {"accept-language": "x"}
    assert "location" in refusal(location={"country": "DE", "city": "Berlin"}).message


def test_accept_language_weights_in_order():
    assert accept_language(["de-DE", "de", "en"]) == "de-DE,de;q=0.9,en;q=0.8"


def test_firecrawl_actions_become_the_contracts_snake_case_steps():
    steps = contract_actions(
        [
            {"type": "wait", "milliseconds": 500},
            {"type": "wait", "selector": "#x"},
            {"type": "click", "selector": "#more", "all": True},
            {"type": "write", "text": "hello"},
            {"type": "press", "key": "Enter"},
            {"type": "scroll", "direction": "down", "amount": 2000},
            {"type": "scroll", "direction": "down", "untilIdle": True, "maxSteps": 5},
            {"type": "executeJavascript", "script": "document.title"},
            {"type": "screenshot", "fullPage": True},
        ],
        ("actions",),
    )
    assert steps == [
        {"type": "wait", "milliseconds": 500},
        {"type": "wait", "selector": "#x"},
        {"type": "click", "selector": "#more", "all": True},
        {"type": "write", "text": "hello"},
        {"type": "press", "key": "Enter"},
        {"type": "scroll", "direction": "down", "amount": 2000},
        {"type": "scroll", "direction": "down", "until_idle": True, "max_steps": 5},
        {"type": "execute_javascript", "script": "document.title"},
        {"type": "screenshot", "full_page": True},
    ]
    got = options(actions=[{"type": "click", "selector": "a"}, {"type": "screenshot"}])
    assert [step.type for step in got.actions] == ["click", "screenshot"]


@pytest.mark.parametrize(
    ("action", "named"),
    [
        ({"type": "scrape"}, "scrape"),
        ({"type": "pdf"}, "pdf"),
        ({"type": "hover", "selector": "a"}, "hover"),
        ({"type": "scroll", "direction": "down", "selector": "#pane"}, "selector"),
        ({"type": "screenshot", "quality": 80}, "quality"),
        ({"type": "click", "selector": "a", "button": "right"}, "button"),
        ({"type": "wait", "milliseconds": 1, "selector": "a"}, "wait"),
        ({"type": "wait", "milliseconds": 120_000}, "actions"),
    ],
)
def test_actions_without_an_honest_equivalent_are_a_clear_400(action, named):
    error = refusal(actions=[action])
    assert named in error.message
    assert error.body()["details"][0]["path"][:2] == ["actions", 0]


def test_proxy_modes_direct_stealth_refused_urls_and_pools_pass_on():
    assert options(proxy="basic").proxy is None
    assert options(proxy="auto").proxy is None
    for mode in ("stealth", "enhanced"):
        assert "evasion" in refusal(proxy=mode).message
    assert options(proxy="http://user:pw@proxy.example:3128").proxy is not None
    pools = Limits(
        max_urls=1, max_crawl_pages=1, max_pages_per_host=1, proxy_pools=frozenset({"eu"})
    )
    _, plan = scrape_plan({"url": URL, "proxy": "eu"}, limits=pools)
    assert plan.options.proxy == "eu"
    with pytest.raises(ApiError) as raised:
        scrape_plan({"url": URL, "proxy": "us"}, limits=pools)
    assert "proxy" in raised.value.message


def test_json_with_a_selector_schema_is_extract_an_llm_schema_or_prompt_is_refused():
    _, plan = scrape_plan(
        {"url": URL, "formats": ["markdown", {"type": "json", "schema": SELECTORS}]},
        limits=LIMITS,
    )
    assert plan.options.extract is not None
    assert plan.options.extract.base_selector == "li.product"
    assert plan.choices.formats == ("markdown", "json")
    assert set(plan.options.formats) == {Format.MARKDOWN, Format.METADATA}
    llm = {"type": "object", "properties": {"title": {"type": "string"}}}
    assert "no LLM" in refusal(formats=[{"type": "json", "schema": llm}]).message
    assert "prompt" in refusal(formats=[{"type": "json", "prompt": "find prices"}]).message
    assert "json" in refusal(formats=["json"]).message
    bad = {"fields": [{"name": "x", "selector": "a[[", "type": "text"}]}
    error = refusal(formats=[{"type": "json", "schema": bad}])
    assert error.body()["details"][0]["path"][:3] == ["formats", "json", "schema"]


def test_structured_data_and_pdf_formats_are_extensions():
    got = options(formats=["structuredData", "pdf"])
    assert set(got.formats) == {Format.STRUCTURED_DATA, Format.PDF, Format.METADATA}


@pytest.mark.parametrize(
    "parsers", [["pdf"], [{"type": "pdf"}], [{"type": "pdf", "mode": "fast"}], None]
)
def test_pdf_parsers_are_accepted_pdfs_are_always_parsed(parsers):
    assert options(parsers=parsers).formats


@pytest.mark.parametrize(
    ("parsers", "named"),
    [
        ([], "always parsed"),
        (["image"], "OCR"),
        ([{"type": "pdf", "mode": "ocr"}], "mode"),
        ([{"type": "pdf", "maxPages": 5}], "CRAWL_MAX_PDF_PAGES"),
        ([{"type": "pdf", "pages": True}], "pages"),
    ],
)
def test_pdf_parsers_asking_for_what_is_not_done_are_refused(parsers, named):
    assert named in refusal(parsers=parsers).message


def test_crawl_scrape_options_and_batches_map_the_same_way():
    plan = crawl_plan(
        {"url": URL, "scrapeOptions": {"headers": {"X": "1"}, "onlyMainContent": False}},
        limits=LIMITS,
    )
    assert plan.scrape.options.headers == {"X": "1"}
    assert not plan.scrape.options.only_main_content
    with pytest.raises(ApiError) as raised:
        crawl_plan({"url": URL, "scrapeOptions": {"proxy": "stealth"}}, limits=LIMITS)
    assert raised.value.body()["details"][0]["path"] == ["scrapeOptions", "proxy"]
    batch = batch_plan({"urls": [URL], "mobile": True}, limits=LIMITS)
    assert batch.scrape.options.device == MOBILE_DEVICE


def result(**fields) -> PageResult:
    base = {
        "request_id": "job-1",
        "result_id": "r" * 32,
        "run_id": "run",
        "url": URL,
        "ok": True,
        "status_code": 200,
        "markdown": "# A",
        "elapsed_ms": 5,
        "fetched_at": datetime(2026, 12, 1, tzinfo=UTC),
        "worker": "w1",
    }
    return PageResult.model_validate(base | fields)


def test_documents_carry_json_structured_data_pdf_and_actions_in_firecrawls_shape():
    page = result(
        json=[{"title": "A"}],
        structured_data=StructuredData(json_ld=[{"@type": "Product"}], open_graph={"og:t": "x"}),
        pdf="JVBERi0=",
        actions=ActionsOutput(screenshots=["iVBO"], returns=[3, "t", None, True, {"a": 1}]),
    )
    doc = document(page, ScrapeChoices(formats=("json", "structuredData", "pdf")))
    assert doc["json"] == [{"title": "A"}]
    assert doc["structuredData"] == {
        "jsonLd": [{"@type": "Product"}],
        "microdata": [],
        "openGraph": {"og:t": "x"},
    }
    assert doc["pdf"] == "data:application/pdf;base64,JVBERi0="
    assert doc["actions"]["screenshots"] == ["data:image/png;base64,iVBO"]
    assert doc["actions"]["scrapes"] == []
    assert [r["type"] for r in doc["actions"]["javascriptReturns"]] == [
        "number",
        "string",
        "object",
        "boolean",
        "object",
    ]
    assert doc["actions"]["javascriptReturns"][0]["value"] == 3
    assert "actions" not in document(result(), ScrapeChoices(formats=("markdown",)))


def test_a_pdf_has_firecrawls_page_counts_and_says_when_cut_or_scanned():
    info = DocumentInfo(title="Report", author="Ann", page_count=300, pages_read=100)
    doc = document(result(document=info, truncated=True), ScrapeChoices(formats=("markdown",)))
    meta = doc["metadata"]
    assert meta["contentType"] == "application/pdf"
    assert (meta["numPages"], meta["totalPages"]) == (100, 300)
    assert (meta["title"], meta["author"]) == ("Report", "Ann")
    assert "100 of 300" in doc["warning"]
    scanned = DocumentInfo(page_count=2, pages_read=2, text_layer=False)
    doc = document(result(document=scanned), ScrapeChoices(formats=("markdown",), warning="w"))
    assert doc["warning"].startswith("w; ")
    assert "scanned" in doc["warning"]


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (ErrorCode.BLOCKED_BY_SITE, "bot challenge"),
        (ErrorCode.ACTION_FAILED, "Action failed"),
        (ErrorCode.PROXY_ERROR, "Proxy error"),
        (ErrorCode.INVALID_SELECTOR, "Invalid selector"),
        (ErrorCode.TIMEOUT, "slow"),
    ],
)
def test_error_codes_are_worded_as_firecrawl_words_them_after_the_code(code, words):
    failed = result(ok=False, error=PageError(code=code, message="slow"))
    error = document(failed, ScrapeChoices(formats=("markdown",)))["metadata"]["error"]
    assert error.startswith(f"{code.value}: ")
    assert words in error
    assert "slow" in error_message(code, "slow")
