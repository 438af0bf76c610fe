"""Firecrawl bodies -> the contract: what is mapped, accepted and refused (pure)."""

from __future__ import annotations

import pytest
import regex

from service.contracts import Format
from service.gateway import _fields
from service.gateway._fields import is_http
from service.gateway.errors import ApiError
from service.gateway.mapping import Limits, batch_plan, crawl_plan, scrape_plan

LIMITS = Limits(max_urls=100, max_crawl_pages=10_000, max_pages_per_host=4)

SDK_SCRAPE_DEFAULTS = {
    "onlyMainContent": True,
    "mobile": False,
    "removeBase64Images": True,
    "fastMode": False,
    "blockAds": True,
    "maxAge": 14_400_000,
    "storeInCache": True,
}
"""What firecrawl-py sends with every scrape options object it was given."""

SDK_CRAWL_DEFAULTS = {
    "sitemap": "include",
    "ignoreQueryParameters": False,
    "deduplicateSimilarURLs": True,
    "crawlEntireDomain": False,
    "allowExternalLinks": False,
    "allowSubdomains": False,
    "ignoreRobotsTxt": False,
    "regexOnFullURL": False,
    "zeroDataRetention": False,
    "origin": "python-sdk@4.55.0",
}


def refusal(call, *args, **kwargs) -> ApiError:
    with pytest.raises(ApiError) as raised:
        call(*args, limits=LIMITS, **kwargs)
    assert raised.value.status == 400
    return raised.value


def test_the_sdk_default_scrape_fields_are_accepted_and_named_in_a_warning():
    """The defaults firecrawl-py sends pass; those not applied are named in the warning."""
    url, plan = scrape_plan(
        {"url": "https://example.com/", "formats": ["markdown"], **SDK_SCRAPE_DEFAULTS},
        limits=LIMITS,
    )
    assert url == "https://example.com/"
    assert set(plan.options.formats) == {Format.MARKDOWN, Format.METADATA}
    assert plan.options.only_main_content  # Firecrawl's default, applied
    assert plan.choices.warning is not None
    assert "onlyMainContent" not in plan.choices.warning
    assert "blockAds" in plan.choices.warning


def test_formats_map_to_the_contract_and_a_full_page_screenshot():
    _, plan = scrape_plan(
        {
            "url": "https://example.com/",
            "formats": ["html", "rawHtml", "links", {"type": "screenshot", "fullPage": True}],
            "timeout": 15_000,
        },
        limits=LIMITS,
    )
    assert set(plan.options.formats) == {
        Format.HTML,
        Format.LINKS,
        Format.SCREENSHOT,
        Format.METADATA,
    }
    assert plan.options.screenshot_full_page
    assert plan.options.timeout_ms == 15_000
    assert plan.choices.formats == ("html", "rawHtml", "links", "screenshot")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("waitFor", 1000),
        ("headers", {"Host": "y"}),
        ("actions", [{"type": "scrape"}]),
        ("location", {"country": "DE", "languages": ["not a tag!"]}),
        ("proxy", "stealth"),
        ("includeTags", ["main["]),
        ("parsers", ["image"]),
        ("zeroDataRetention", True),
    ],
)
def test_an_option_the_cluster_cannot_honour_is_refused_by_name(field, value):
    error = refusal(scrape_plan, {"url": "https://example.com/", field: value})
    assert field in error.message
    assert error.body()["success"] is False
    assert field in error.body()["details"][0]["path"]


def test_unknown_keys_and_formats_are_refused_by_name():
    assert "colour" in refusal(scrape_plan, {"url": "https://e.com/", "colour": 1}).message
    error = refusal(scrape_plan, {"url": "https://e.com/", "formats": ["summary"]})
    assert "summary" in error.message
    error = refusal(
        scrape_plan, {"url": "https://e.com/", "formats": [{"type": "json", "schema": {}}]}
    )
    assert "json" in error.message


def test_a_url_that_is_not_http_is_refused():
    assert "url" in refusal(scrape_plan, {"url": "file:///etc/passwd"}).message
    assert "url" in refusal(scrape_plan, {}).message


def test_crawl_defaults_follow_firecrawl_robots_sitemap_unbounded_depth_under_the_seed():
    plan = crawl_plan(
        {"url": "https://example.com/docs/", "limit": 50, **SDK_CRAWL_DEFAULTS}, limits=LIMITS
    )
    spec = plan.spec
    assert spec.max_pages == 50
    assert spec.max_depth == 100
    assert spec.sitemap
    assert spec.scope == "host"
    assert plan.scrape.options.respect_robots
    [under] = spec.exclude
    assert not regex.search(under, "https://example.com/docs/a")
    assert regex.search(under, "https://example.com/blog/a")


def test_crawl_entire_domain_subdomains_sitemap_only_and_delay():
    plan = crawl_plan(
        {
            "url": "https://example.com/docs",
            "crawlEntireDomain": True,
            "allowSubdomains": True,
            "sitemap": "only",
            "delay": 2,
            "ignoreRobotsTxt": True,
        },
        limits=LIMITS,
    )
    assert plan.spec.exclude == ()
    assert plan.spec.scope == "domain"
    assert plan.spec.max_depth == 0
    assert plan.spec.sitemap
    assert plan.spec.delay_ms == 2000
    assert not plan.scrape.options.respect_robots


def test_include_paths_match_the_path_as_firecrawl_does():
    plan = crawl_plan(
        {"url": "https://example.com/", "includePaths": ["^/page/", "blog"]}, limits=LIMITS
    )
    anchored, loose = plan.spec.include
    assert regex.search(anchored, "https://example.com/page/3")
    assert not regex.search(anchored, "https://example.com/x/page/3")
    assert regex.search(loose, "https://example.com/x/blog/1")
    assert not regex.search(loose, "https://blog.example.com/")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("limit", 20_000),
        ("maxConcurrency", 2),
        ("allowExternalLinks", True),
        ("prompt", "find docs"),
        ("includePaths", ["("]),
        ("delay", 120),
    ],
)
def test_crawl_refusals_name_the_option(field, value):
    error = refusal(crawl_plan, {"url": "https://example.com/", field: value})
    assert field in error.message


def test_a_batch_keeps_valid_urls_and_reports_the_invalid_ones():
    plan = batch_plan(
        {"urls": ["https://a.example/", "nope", "https://a.example/"], "formats": ["markdown"]},
        limits=LIMITS,
    )
    assert plan.urls == ("https://a.example/",)
    assert plan.invalid_urls == ("nope",)
    error = refusal(
        batch_plan, {"urls": ["https://a.example/", "nope"], "ignoreInvalidURLs": False}
    )
    assert "nope" in error.message
    error = refusal(batch_plan, {"urls": [f"https://a.example/{n}" for n in range(101)]})
    assert "urls" in error.message


def test_a_batch_over_the_limit_is_refused_after_checking_one_url_past_it(monkeypatch):
    """140,000 URLs, invalid ones ignored (the default): refused naming the limit once the
    101st distinct good URL is checked, a duplicate and an invalid one before it not
    counted; with `ignoreInvalidURLs: false` every URL is checked (the invalid ones named)."""
    checked: list[str] = []

    def counted(url: str) -> bool:
        checked.append(url)
        return is_http(url)

    monkeypatch.setattr(_fields, "is_http", counted)
    urls = ["https://a.example/0", "nope", *(f"https://a.example/{n}" for n in range(140_000))]
    error = refusal(batch_plan, {"urls": urls})
    assert "at most 100 URLs" in error.details[0].message
    assert len(checked) == 103
    checked.clear()
    strict = ["nope", *(f"https://a.example/{n}" for n in range(1_000))]
    error = refusal(batch_plan, {"urls": strict, "ignoreInvalidURLs": False})
    assert "nope" in error.message
    assert len(checked) == 1_001


def test_the_page_cache_options_map_to_the_contract():
    """`maxAge` (Firecrawl's 2 days when absent), `storeInCache`, `minAge` and `lockdown`."""
    url = "https://example.com/"
    _, plain = scrape_plan({"url": url}, limits=LIMITS)
    assert plain.options.max_age_ms == 2 * 24 * 3600 * 1000
    assert plain.options.store_in_cache
    assert not plain.options.cache_only
    _, sdk = scrape_plan({"url": url, **SDK_SCRAPE_DEFAULTS}, limits=LIMITS)
    assert sdk.options.max_age_ms == 14_400_000
    _, fresh = scrape_plan({"url": url, "maxAge": 0, "storeInCache": False}, limits=LIMITS)
    assert (fresh.options.max_age_ms, fresh.options.store_in_cache) == (0, False)
    _, locked = scrape_plan({"url": url, "lockdown": True, "maxAge": 60_000}, limits=LIMITS)
    assert locked.options.cache_only
    assert locked.options.max_age_ms == 60_000
    assert locked.choices.lockdown
    _, aged = scrape_plan({"url": url, "minAge": 1}, limits=LIMITS)
    assert aged.options.cache_only
    assert aged.options.max_age_ms == 0  # any entry at least minAge old
    assert aged.choices.min_age_ms == 1
    crawl = crawl_plan({"url": url, "scrapeOptions": {"maxAge": 5}}, limits=LIMITS)
    assert crawl.scrape.options.max_age_ms == 5


@pytest.mark.parametrize(
    ("option", "value"),
    [("maxAge", -1), ("maxAge", "1h"), ("minAge", 1.5), ("lockdown", "yes"), ("storeInCache", 1)],
)
def test_a_bad_page_cache_option_is_a_400_naming_it(option, value):
    error = refusal(scrape_plan, {"url": "https://example.com/", option: value})
    assert option in error.message


def test_change_tracking_is_never_answered_from_the_cache():
    """Firecrawl: requests with `changeTracking` bypass the cache (`maxAge` is ignored)."""
    _, plan = scrape_plan(
        {"url": "https://example.com/", "formats": ["markdown", "changeTracking"]},
        limits=LIMITS,
    )
    assert plan.options.change_tracking is not None
    assert plan.options.max_age_ms == 0
    assert plan.options.store_in_cache


def test_skip_tls_verification_is_passed_on_only_where_the_gateway_allows_it():
    """Without `CRAWL_ALLOW_INSECURE_TLS` the SDK's `skipTlsVerification: true` is accepted,
    not sent, and named in the warning; with it, it is sent and not named."""
    body = {"url": "https://example.com/", "skipTlsVerification": True}
    _, verified = scrape_plan(body, limits=LIMITS)
    assert not verified.options.skip_tls_verification
    assert "skipTlsVerification" in (verified.choices.warning or "")
    allowing = Limits(
        max_urls=100, max_crawl_pages=10_000, max_pages_per_host=4, allow_insecure_tls=True
    )
    _, insecure = scrape_plan(body, limits=allowing)
    assert insecure.options.skip_tls_verification
    assert insecure.choices.warning is None
    _, default = scrape_plan({**body, "skipTlsVerification": False}, limits=allowing)
    assert not default.options.skip_tls_verification
    crawl = crawl_plan(
        {"url": "https://example.com/", "scrapeOptions": {"skipTlsVerification": True}},
        limits=allowing,
    )
    assert crawl.scrape.options.skip_tls_verification
