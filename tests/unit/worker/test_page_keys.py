"""A page task's key: its host, its registered domain with CRAWL_PAGE_KEY=domain, a stable
shard of a host spread on purpose (CRAWL_HOST_SHARDS), or the request's session."""

from __future__ import annotations

from collections import Counter

from service.contracts import CrawlOptions
from service.settings import Settings
from service.worker.coordinator.page_keys import page_key

OPTIONS = CrawlOptions()


def test_a_page_is_keyed_by_its_lower_case_host_without_the_port():
    """One fetcher owns all of a host, whatever the case, port or path of its URLs."""
    settings = Settings()
    assert page_key("http://Docs.Example.com:8080/a", OPTIONS, settings) == "docs.example.com"
    assert page_key("https://docs.example.com/b?q=1", OPTIONS, settings) == "docs.example.com"
    assert page_key("http://other.example.com/", OPTIONS, settings) == "other.example.com"


def test_domain_keys_put_a_sites_hosts_together():
    """CRAWL_PAGE_KEY=domain: hosts of one registrable domain share a key; a public-suffix
    site (`github.io`) keeps each user's site apart."""
    settings = Settings(page_key="domain")
    assert page_key("http://a.example.co.uk/", OPTIONS, settings) == "example.co.uk"
    assert page_key("http://b.a.example.co.uk/", OPTIONS, settings) == "example.co.uk"
    assert page_key("https://me.github.io/x", OPTIONS, settings) == "me.github.io"


def test_a_sharded_host_spreads_its_urls_over_its_shards_deterministically():
    """CRAWL_HOST_SHARDS {"docs.example.com": 4}: each URL of the host goes to one of 4
    shards, always the same one; the shards are all used; other hosts are not sharded."""
    settings = Settings(host_shards={"docs.example.com": 4})
    urls = [f"https://docs.example.com/page/{i}" for i in range(200)]
    keys = [page_key(url, OPTIONS, settings) for url in urls]
    assert keys == [page_key(url, OPTIONS, settings) for url in urls]
    assert set(keys) == {f"docs.example.com#{shard}" for shard in range(4)}
    assert min(Counter(keys).values()) > 20  # spread, not piled on one shard
    assert page_key("https://other.example.com/", OPTIONS, settings) == "other.example.com"


def test_shards_apply_to_domains_when_pages_are_keyed_by_domain():
    """With CRAWL_PAGE_KEY=domain, CRAWL_HOST_SHARDS names domains."""
    settings = Settings(page_key="domain", host_shards={"example.com": 2})
    keys = {page_key(f"https://h{i}.example.com/", OPTIONS, settings) for i in range(50)}
    assert keys == {"example.com#0", "example.com#1"}


def test_a_session_keys_its_pages_by_the_session_whatever_the_host():
    """A request with a `session` has one fetcher (its browser context) for all its pages."""
    options = CrawlOptions(session="cart")
    settings = Settings(host_shards={"a.test": 3})
    assert page_key("http://a.test/1", options, settings) == "session:cart"
    assert page_key("http://b.test/2", options, settings) == "session:cart"
