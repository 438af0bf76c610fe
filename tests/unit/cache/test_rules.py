"""The page cache's pure rules: the key of a page variant, who may use the shared cache,
what a shared cache may store, and what an entry is worth to a request."""

from __future__ import annotations

import pytest

from service.cache import (
    Validators,
    Worth,
    bypass_reason,
    cache_key,
    storable,
    tenant_scope,
    worth,
)
from service.contracts import CrawlOptions, Format


def test_the_key_ignores_what_only_shapes_outputs_and_follows_what_changes_the_document():
    """Formats, main content and tags are derived from the stored document; the device,
    the wait and scripts change the document itself."""
    url = "https://example.com/a"
    base = cache_key(url, CrawlOptions())
    shaped = CrawlOptions(
        formats=(Format.HTML, Format.LINKS), only_main_content=True, include_tags=("main",)
    )
    assert cache_key(url, shaped) == base
    for changed in (
        CrawlOptions(javascript=False),
        CrawlOptions(wait_for="#ready"),
        CrawlOptions(render="http"),
        CrawlOptions(locale="de-DE"),
        CrawlOptions(device="Pixel 7"),
    ):
        assert cache_key(url, changed) != base, changed


def test_the_key_is_of_the_normalised_url_and_of_its_scope():
    """Equal URLs after normalisation share a key; a tenant's scope does not."""
    options = CrawlOptions()
    assert cache_key("HTTPS://Example.com:443/a", options) == cache_key(
        "https://example.com/a", options
    )
    assert cache_key("https://example.com/a", options, scope="tenant-a") != cache_key(
        "https://example.com/a", options, scope="tenant-b"
    )


@pytest.mark.parametrize(
    ("options", "url", "why"),
    [
        ({"headers": {"Authorization": "Bearer x"}}, "https://e.com/", "headers"),
        (
            {"cookies": [{"name": "s", "value": "v", "url": "https://e.com/"}]},
            "https://e.com/",
            "cookies",
        ),
        ({"session": "s1"}, "https://e.com/", "session"),
        ({"proxy": "http://proxy.example:8080"}, "https://e.com/", "proxy"),
        ({"actions": [{"type": "wait", "milliseconds": 5}]}, "https://e.com/", "actions"),
        ({}, "https://user:pw@e.com/", "credentials in the URL"),
        ({"skip_tls_verification": True}, "https://e.com/", "skip_tls_verification"),
    ],
)
def test_identity_keeps_a_request_out_of_the_shared_cache(options, url, why):
    assert bypass_reason(url, CrawlOptions(**options)) == why


def test_a_plain_request_may_use_the_shared_cache():
    assert bypass_reason("https://e.com/a", CrawlOptions(max_age_ms=1000)) is None


@pytest.mark.parametrize(
    ("status", "cache_control", "kept"),
    [
        (200, None, True),
        (200, "max-age=60, public", True),
        (200, "no-store", False),
        (200, "private, max-age=600", False),
        (200, "No-Store", False),
        (404, None, False),
        (301, None, False),
        (None, None, False),
    ],
)
def test_a_shared_cache_stores_only_complete_answers_not_marked_private(
    status, cache_control, kept
):
    headers = {} if cache_control is None else {"cache-control": cache_control}
    assert storable(status, headers) is kept


def test_an_entry_is_fresh_inside_max_age_then_revalidated_or_refetched():
    etag = Validators(etag='"v1"')
    assert worth(validated_at_s=100, now_s=100.5, max_age_ms=1000, validators=etag) is Worth.FRESH
    assert worth(validated_at_s=100, now_s=102, max_age_ms=1000, validators=etag) is (
        Worth.REVALIDATE
    )
    assert worth(validated_at_s=100, now_s=102, max_age_ms=1000, validators=Validators()) is (
        Worth.STALE
    )


def test_validators_become_the_conditional_request_headers():
    both = Validators.of({"etag": '"v1"', "last-modified": "Wed, 01 Jan 2025 00:00:00 GMT"})
    assert both.request_headers() == {
        "If-None-Match": '"v1"',
        "If-Modified-Since": "Wed, 01 Jan 2025 00:00:00 GMT",
    }
    assert not Validators.of({})


def test_a_tenant_scope_comes_from_the_gateway_marker_or_the_metadata():
    """`CRAWL_CACHE_SCOPE=tenant`: the gateway's tenant, a producer's `tenant`, or none."""
    assert tenant_scope({"firecrawl": {"tenant": "acme"}}) == "tenant:acme"
    assert tenant_scope({"firecrawl_scrape": {"tenant": "acme"}}) == "tenant:acme"
    assert tenant_scope({"tenant": "beta"}) == "tenant:beta"
    assert tenant_scope({}) == "tenant:"
    assert tenant_scope({"firecrawl": "forged"}) == "tenant:"
