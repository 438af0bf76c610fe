"""Firecrawl v2 request bodies -> the contract (`CrawlOptions`, `CrawlSpec`): pure functions.

Every key of a body is either mapped, accepted because its value asks for nothing the cluster
does not do (the defaults the SDKs send), or refused with Firecrawl's 400 naming it. Unknown
keys are refused too, as Firecrawl's strict schemas do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from service.contracts import (
    MAX_CRAWL_DEPTH,
    CrawlOptions,
    CrawlSpec,
    Format,
)
from service.contracts_webhook import WebhookConfig
from service.gateway._fields import (
    COMMON_KEYS,
    bool_of,
    int_of,
    is_http,
    mapping_of,
    refuse_set,
    refuse_unknown,
    split_urls,
    strings_of,
    url_of,
    validated,
)
from service.gateway.errors import ApiError, Detail, bad_request, refused
from service.gateway.options import ScrapeChoices, cache_fields, scrape_choices
from service.gateway.page_options import contract_fields

if TYPE_CHECKING:
    from collections.abc import Mapping

    from service.settings import Settings

Path = tuple[str | int, ...]

MAX_DELAY_S: Final = 60
"""Longest `delay` (seconds between two pages of a host) the contract's `delay_ms` takes."""

SCHEME_AND_HOST: Final = r"^[^:/?#]+://[^/?#]+(?=[/?#]|$)"
"""The start of a normalised URL up to its path: Firecrawl's path patterns are put after it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The cluster's ceilings a request is checked against (from the settings)."""

    max_urls: int
    max_crawl_pages: int
    max_pages_per_host: int
    proxy_pools: frozenset[str] | None = None
    """The `CRAWL_PROXIES` pool names a `proxy` may name (None: not judged here)."""
    allow_insecure_tls: bool = False
    """`skipTlsVerification: true` is passed on (`CRAWL_ALLOW_INSECURE_TLS`); otherwise it is
    named in the document's `warning`."""

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            max_urls=settings.max_urls_per_request,
            max_crawl_pages=settings.max_crawl_pages,
            max_pages_per_host=settings.max_pages_per_host,
            proxy_pools=frozenset(settings.proxies),
            allow_insecure_tls=settings.allow_insecure_tls,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrapePlan:
    """What one page of a job asks for: the contract's options and how to shape documents."""

    options: CrawlOptions
    choices: ScrapeChoices


@dataclass(frozen=True, slots=True, kw_only=True)
class CrawlPlan:
    url: str
    spec: CrawlSpec
    scrape: ScrapePlan
    echo: dict[str, Any]
    """The options as given, for `GET /v2/crawl/active`."""
    webhook: WebhookConfig | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchPlan:
    urls: tuple[str, ...]
    invalid_urls: tuple[str, ...]
    scrape: ScrapePlan
    webhook: WebhookConfig | None = None


def scrape_plan(body: Mapping[str, Any], *, limits: Limits) -> tuple[str, ScrapePlan]:
    """`POST /v2/scrape`: the URL and the plan of its one page."""
    url = url_of(body.get("url"), ("url",))
    extra = set(body) - {"url", "zeroDataRetention", *COMMON_KEYS}
    options = {key: body[key] for key in extra}
    _no_retention(body, ())
    return url, _plan(options, (), limits=limits)


def crawl_plan(body: Mapping[str, Any], *, limits: Limits) -> CrawlPlan:
    """`POST /v2/crawl`: a deep crawl from `url` with Firecrawl's semantics."""
    refuse_unknown(body, _CRAWL_KEYS, ())
    url = url_of(body.get("url"), ("url",))
    refuse_set(body, ("prompt", "robotsUserAgent"), ())
    _no_retention(body, ())
    _must_be(body, "allowExternalLinks", value=False, why="only the seed's site is crawled")
    _concurrency(body, limits)
    scrape = _plan(
        mapping_of(body.get("scrapeOptions"), ("scrapeOptions",)),
        ("scrapeOptions",),
        limits=limits,
        respect_robots=not bool_of(body, "ignoreRobotsTxt", default=False),
    )
    spec = _spec(body, url, limits)
    echo = _without_credentials(
        {key: value for key, value in body.items() if key not in {"url", "webhook", *COMMON_KEYS}}
    )
    hook = _webhook(body.get("webhook"))
    return CrawlPlan(url=url, spec=spec, scrape=scrape, echo=echo, webhook=hook)


REDACTED: Final = "[redacted]"
"""What the echo of a crawl's options shows instead of a credential."""


def _without_credentials(echo: dict[str, Any]) -> dict[str, Any]:
    """The options as given, but for credentials (the echo travels on every event): the
    page headers' values and the user info of a proxy URL."""
    options = echo.get("scrapeOptions")
    if not isinstance(options, dict):
        return echo
    options = dict(options)
    if isinstance(options.get("headers"), dict):
        options["headers"] = dict.fromkeys(options["headers"], REDACTED)
    proxy = options.get("proxy")
    if isinstance(proxy, str) and "@" in proxy:
        scheme, _, rest = proxy.partition("://")
        options["proxy"] = f"{scheme}://{REDACTED}@{rest.rpartition('@')[2]}"
    return echo | {"scrapeOptions": options}


def batch_plan(body: Mapping[str, Any], *, limits: Limits) -> BatchPlan:
    """`POST /v2/batch/scrape`: a list crawl of `urls` (scrape options at the top level)."""
    urls = body.get("urls")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        raise bad_request(Detail(path=("urls",), message="a non-empty list of URLs is required"))
    refuse_set(body, ("appendToId",), ())
    _no_retention(body, ())
    _concurrency(body, limits)
    ignoring = bool_of(body, "ignoreInvalidURLs", default=True)
    good, bad = split_urls(urls, most=limits.max_urls if ignoring else None)
    if bad and not ignoring:
        raise bad_request(Detail(path=("urls",), message=f"invalid URLs: {', '.join(bad)}"))
    if not good:
        raise bad_request(Detail(path=("urls",), message="no valid http(s) URL"))
    if len(good) > limits.max_urls:
        raise refused(("urls",), f"at most {limits.max_urls} URLs per batch on this cluster")
    batch_keys = {
        "urls", "ignoreInvalidURLs", "maxConcurrency", "zeroDataRetention", "webhook", *COMMON_KEYS
    }  # fmt: skip
    options = {key: value for key, value in body.items() if key not in batch_keys}
    plan = _plan(options, (), limits=limits)
    hook = _webhook(body.get("webhook"))
    return BatchPlan(urls=tuple(good), invalid_urls=tuple(bad), scrape=plan, webhook=hook)


def _webhook(value: object) -> WebhookConfig | None:
    """Firecrawl's `webhook`: a URL, or `{url, headers, metadata, events}`."""
    if value is None:
        return None
    raw = {"url": value} if isinstance(value, str) else value
    if not isinstance(raw, dict):
        raise bad_request(Detail(path=("webhook",), message="a URL or an object is expected"))
    config: WebhookConfig = validated(WebhookConfig, raw, ("webhook",))
    if not is_http(config.url):
        raise bad_request(Detail(path=("webhook", "url"), message="an http(s) URL is required"))
    return config


_CRAWL_KEYS: Final = frozenset(
    {
        "url", "prompt", "excludePaths", "includePaths", "maxDiscoveryDepth", "sitemap",
        "ignoreQueryParameters", "deduplicateSimilarURLs", "limit", "crawlEntireDomain",
        "allowExternalLinks", "allowSubdomains", "ignoreRobotsTxt", "robotsUserAgent", "delay",
        "maxConcurrency", "webhook", "scrapeOptions", "regexOnFullURL", "zeroDataRetention",
        "ignoreSitemap", *COMMON_KEYS,
    }
)  # fmt: skip


def _plan(
    options: Mapping[str, Any], path: Path, *, limits: Limits, respect_robots: bool = False
) -> ScrapePlan:
    insecure = limits.allow_insecure_tls
    choices = scrape_choices(options, path, allow_insecure_tls=insecure)
    fields: dict[str, Any] = {
        "formats": sorted(choices.contract_formats | {Format.METADATA}),
        "screenshot_full_page": choices.full_page,
        "respect_robots": respect_robots,
        "skip_tls_verification": insecure and options.get("skipTlsVerification") is True,
    }
    if choices.timeout_ms is not None:
        fields["timeout_ms"] = choices.timeout_ms
    if choices.change_tracking is not None:
        fields["change_tracking"] = choices.change_tracking
    fields |= contract_fields(options, path, json_schema=choices.json_schema)
    fields |= cache_fields(options, path)
    if choices.change_tracking is not None and not choices.cache_only:
        fields["max_age_ms"] = 0  # as Firecrawl: a tracked page is fetched, never a cache hit
    # the per-page ceilings are the worker's (it clamps `timeout_ms`)
    context = None if limits.proxy_pools is None else {"proxy_pools": limits.proxy_pools}
    options_: CrawlOptions = validated(CrawlOptions, fields, path, context=context)
    return ScrapePlan(options=options_, choices=choices)


def _spec(body: Mapping[str, Any], url: str, limits: Limits) -> CrawlSpec:
    limit = int_of(body, "limit", default=limits.max_crawl_pages, low=1)
    if limit > limits.max_crawl_pages:
        raise refused(("limit",), f"at most {limits.max_crawl_pages} pages per crawl here")
    depth = int_of(body, "maxDiscoveryDepth", default=MAX_CRAWL_DEPTH, low=0)
    if depth > MAX_CRAWL_DEPTH:
        raise refused(("maxDiscoveryDepth",), f"at most {MAX_CRAWL_DEPTH}")
    sitemap = body.get("sitemap") or (
        "skip" if bool_of(body, "ignoreSitemap", default=False) else "include"
    )
    if not isinstance(sitemap, str) or sitemap not in {"include", "skip", "only"}:
        raise bad_request(Detail(path=("sitemap",), message="one of include, skip, only"))
    delay = body.get("delay") or 0
    if not isinstance(delay, int | float) or not 0 <= delay <= MAX_DELAY_S:
        raise refused(("delay",), f"seconds between 0 and {MAX_DELAY_S}")
    full_url = bool_of(body, "regexOnFullURL", default=False)
    fields: dict[str, Any] = {
        "max_pages": limit,
        "max_depth": 0 if sitemap == "only" else depth,
        "scope": "domain" if bool_of(body, "allowSubdomains", default=False) else "host",
        "include": [_pattern(p, full_url=full_url) for p in strings_of(body, "includePaths")],
        "exclude": [_pattern(p, full_url=full_url) for p in strings_of(body, "excludePaths")]
        + _under_seed(url, entire=bool_of(body, "crawlEntireDomain", default=False)),
        "sitemap": sitemap != "skip",
        "ignore_query": bool_of(body, "ignoreQueryParameters", default=False),
        "delay_ms": round(delay * 1000),
    }
    bool_of(body, "deduplicateSimilarURLs", default=True)
    spec: CrawlSpec = validated(
        CrawlSpec, fields, (), context={"max_crawl_pages": limits.max_crawl_pages}
    )
    return spec


def _pattern(pattern: str, *, full_url: bool) -> str:
    """A Firecrawl path pattern as one searched in the whole normalised URL."""
    if full_url:
        return pattern
    if pattern.startswith("^"):
        return f"{SCHEME_AND_HOST}(?:{pattern[1:]})"
    return f"{SCHEME_AND_HOST}[^?#]*?(?:{pattern})"


def _under_seed(url: str, *, entire: bool) -> list[str]:
    """Without `crawlEntireDomain`, Firecrawl follows only paths under the seed's path: an
    exclude pattern for every other path of the host."""
    path = urlsplit(url).path
    if entire or path in {"", "/"}:
        return []
    tail = "" if path.endswith("/") else "(?:[/?#]|$)"
    return [f"{SCHEME_AND_HOST}(?!{re.escape(path)}{tail})"]


def _no_retention(body: Mapping[str, Any], path: Path) -> None:
    if body.get("zeroDataRetention") is True:
        raise refused(
            (*path, "zeroDataRetention"),
            "results stay on the Kafka topics for their retention; zero retention is impossible",
        )


def _must_be(body: Mapping[str, Any], key: str, *, value: object, why: str) -> None:
    if key in body and body[key] != value:
        raise refused((key,), f"only {value!r} is supported: {why}")


def _concurrency(body: Mapping[str, Any], limits: Limits) -> None:
    wanted = body.get("maxConcurrency")
    if wanted is None:
        return
    if not isinstance(wanted, int) or wanted < limits.max_pages_per_host:
        raise refused(
            ("maxConcurrency",),
            f"the cluster runs up to {limits.max_pages_per_host} pages of a host at once and "
            "cannot lower that per job; use a value of at least that, or leave it out",
        )


__all__ = [
    "ApiError",
    "BatchPlan",
    "CrawlPlan",
    "Limits",
    "ScrapePlan",
    "batch_plan",
    "crawl_plan",
    "scrape_plan",
]
