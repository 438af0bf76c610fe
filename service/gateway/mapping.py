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

from pydantic import ValidationError

from service.contracts import (
    MAX_CRAWL_DEPTH,
    CrawlOptions,
    CrawlSpec,
    Format,
)
from service.gateway.errors import ApiError, Detail, bad_request, refused
from service.gateway.options import ScrapeChoices, scrape_choices
from service.webhooks.payloads import WebhookConfig

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

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            max_urls=settings.max_urls_per_request,
            max_crawl_pages=settings.max_crawl_pages,
            max_pages_per_host=settings.max_pages_per_host,
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


_COMMON: Final = frozenset({"origin", "integration", "auditMetadata"})
"""Keys every body may carry that change nothing (bookkeeping of the caller)."""


def scrape_plan(body: Mapping[str, Any], *, limits: Limits) -> tuple[str, ScrapePlan]:
    """`POST /v2/scrape`: the URL and the plan of its one page."""
    url = _url(body.get("url"), ("url",))
    extra = set(body) - {"url", "zeroDataRetention", *_COMMON}
    options = {key: body[key] for key in extra}
    _no_retention(body, ())
    return url, _plan(options, (), limits=limits)


def crawl_plan(body: Mapping[str, Any], *, limits: Limits) -> CrawlPlan:
    """`POST /v2/crawl`: a deep crawl from `url` with Firecrawl's semantics."""
    _unknown(body, _CRAWL_KEYS, ())
    url = _url(body.get("url"), ("url",))
    _refuse_set(body, ("prompt", "robotsUserAgent"), ())
    _no_retention(body, ())
    _must_be(body, "allowExternalLinks", value=False, why="only the seed's site is crawled")
    _concurrency(body, limits)
    scrape = _plan(
        _mapping(body.get("scrapeOptions"), ("scrapeOptions",)),
        ("scrapeOptions",),
        limits=limits,
        respect_robots=not _bool(body, "ignoreRobotsTxt", default=False),
    )
    spec = _spec(body, url, limits)
    echo = {key: value for key, value in body.items() if key not in {"url", "webhook", *_COMMON}}
    hook = _webhook(body.get("webhook"))
    return CrawlPlan(url=url, spec=spec, scrape=scrape, echo=echo, webhook=hook)


def batch_plan(body: Mapping[str, Any], *, limits: Limits) -> BatchPlan:
    """`POST /v2/batch/scrape`: a list crawl of `urls` (scrape options at the top level)."""
    urls = body.get("urls")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        raise bad_request(Detail(path=("urls",), message="a non-empty list of URLs is required"))
    _refuse_set(body, ("appendToId",), ())
    _no_retention(body, ())
    _concurrency(body, limits)
    good, bad = _split_urls(urls)
    if bad and not _bool(body, "ignoreInvalidURLs", default=True):
        raise bad_request(Detail(path=("urls",), message=f"invalid URLs: {', '.join(bad)}"))
    if not good:
        raise bad_request(Detail(path=("urls",), message="no valid http(s) URL"))
    if len(good) > limits.max_urls:
        raise refused(("urls",), f"at most {limits.max_urls} URLs per batch on this cluster")
    batch_keys = {
        "urls", "ignoreInvalidURLs", "maxConcurrency", "zeroDataRetention", "webhook", *_COMMON
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
    config: WebhookConfig = _validated(WebhookConfig, raw, ("webhook",))
    if not _is_http(config.url):
        raise bad_request(Detail(path=("webhook", "url"), message="an http(s) URL is required"))
    return config


_CRAWL_KEYS: Final = frozenset(
    {
        "url", "prompt", "excludePaths", "includePaths", "maxDiscoveryDepth", "sitemap",
        "ignoreQueryParameters", "deduplicateSimilarURLs", "limit", "crawlEntireDomain",
        "allowExternalLinks", "allowSubdomains", "ignoreRobotsTxt", "robotsUserAgent", "delay",
        "maxConcurrency", "webhook", "scrapeOptions", "regexOnFullURL", "zeroDataRetention",
        "ignoreSitemap", *_COMMON,
    }
)  # fmt: skip


def _plan(
    options: Mapping[str, Any], path: Path, *, limits: Limits, respect_robots: bool = False
) -> ScrapePlan:
    choices = scrape_choices(options, path)
    fields: dict[str, Any] = {
        "formats": sorted(choices.contract_formats | {Format.METADATA}),
        "screenshot_full_page": choices.full_page,
        "respect_robots": respect_robots,
    }
    if choices.timeout_ms is not None:
        fields["timeout_ms"] = choices.timeout_ms
    del limits  # the per-page ceilings are the worker's (it clamps `timeout_ms`)
    return ScrapePlan(options=_validated(CrawlOptions, fields, path), choices=choices)


def _spec(body: Mapping[str, Any], url: str, limits: Limits) -> CrawlSpec:
    limit = _int(body, "limit", default=limits.max_crawl_pages, low=1)
    if limit > limits.max_crawl_pages:
        raise refused(("limit",), f"at most {limits.max_crawl_pages} pages per crawl here")
    depth = _int(body, "maxDiscoveryDepth", default=MAX_CRAWL_DEPTH, low=0)
    if depth > MAX_CRAWL_DEPTH:
        raise refused(("maxDiscoveryDepth",), f"at most {MAX_CRAWL_DEPTH}")
    sitemap = body.get("sitemap") or (
        "skip" if _bool(body, "ignoreSitemap", default=False) else "include"
    )
    if sitemap not in {"include", "skip", "only"}:
        raise bad_request(Detail(path=("sitemap",), message="one of include, skip, only"))
    delay = body.get("delay") or 0
    if not isinstance(delay, int | float) or not 0 <= delay <= MAX_DELAY_S:
        raise refused(("delay",), f"seconds between 0 and {MAX_DELAY_S}")
    full_url = _bool(body, "regexOnFullURL", default=False)
    fields: dict[str, Any] = {
        "max_pages": limit,
        "max_depth": 0 if sitemap == "only" else depth,
        "scope": "domain" if _bool(body, "allowSubdomains", default=False) else "host",
        "include": [_pattern(p, full_url=full_url) for p in _strings(body, "includePaths")],
        "exclude": [_pattern(p, full_url=full_url) for p in _strings(body, "excludePaths")]
        + _under_seed(url, entire=_bool(body, "crawlEntireDomain", default=False)),
        "sitemap": sitemap != "skip",
        "ignore_query": _bool(body, "ignoreQueryParameters", default=False),
        "delay_ms": round(delay * 1000),
    }
    _bool(body, "deduplicateSimilarURLs", default=True)
    spec: CrawlSpec = _validated(
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


def _validated(
    model: type[Any], fields: dict[str, Any], path: Path, context: dict[str, Any] | None = None
) -> Any:  # noqa: ANN401 - the model's own type
    try:
        return model.model_validate(fields, context=context)
    except ValidationError as exc:
        details = [
            Detail(path=(*path, *_firecrawl_name(error["loc"])), message=error["msg"])
            for error in exc.errors()
        ]
        raise bad_request(*details) from None


_CONTRACT_NAMES: Final = {
    "max_pages": "limit",
    "max_depth": "maxDiscoveryDepth",
    "include": "includePaths",
    "exclude": "excludePaths",
    "delay_ms": "delay",
    "timeout_ms": "timeout",
}


def _firecrawl_name(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    return tuple(_CONTRACT_NAMES.get(str(part), part) for part in loc[:1]) + loc[1:]


def _split_urls(urls: list[str]) -> tuple[list[str], list[str]]:
    good: list[str] = []
    bad: list[str] = []
    for url in urls:
        (good if _is_http(url) else bad).append(url)
    return list(dict.fromkeys(good)), bad


def _is_http(url: str) -> bool:
    parts = urlsplit(url.strip())
    return parts.scheme.lower() in {"http", "https"} and bool(parts.hostname)


def _url(value: object, path: Path) -> str:
    if not isinstance(value, str) or not _is_http(value):
        raise bad_request(Detail(path=path, message="an absolute http(s) URL is required"))
    return value.strip()


def _unknown(body: Mapping[str, Any], known: frozenset[str], path: Path) -> None:
    extra = sorted(set(body) - known)
    if extra:
        details = [Detail(path=(*path, key), message="unrecognized key") for key in extra]
        raise bad_request(*details)


def _refuse_set(body: Mapping[str, Any], keys: tuple[str, ...], path: Path) -> None:
    for key in keys:
        if body.get(key) not in (None, "", [], {}):
            raise refused((*path, key), "not supported by this gateway")


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


def _mapping(value: object, path: Path) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(Detail(path=path, message="an object is expected"))
    return value


def _bool(body: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(Detail(path=(key,), message="a boolean is expected"))
    return value


def _int(body: Mapping[str, Any], key: str, *, default: int, low: int) -> int:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise bad_request(Detail(path=(key,), message=f"an integer of at least {low} is expected"))
    return value


def _strings(body: Mapping[str, Any], key: str) -> list[str]:
    value = body.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise bad_request(Detail(path=(key,), message="a list of strings is expected"))
    return value


__all__ = [
    "ApiError",
    "BatchPlan",
    "CrawlPlan",
    "Limits",
    "MapPlan",
    "ScrapePlan",
    "batch_plan",
    "crawl_plan",
    "map_plan",
    "scrape_plan",
]


MAP_LIMIT: Final = 5000
"""Firecrawl's default `limit` of `POST /v2/map`."""

MAP_MAX_LIMIT: Final = 100_000
"""Firecrawl's largest `limit` of `POST /v2/map`."""

_MAP_KEYS: Final = frozenset(
    {
        "url", "search", "sitemap", "includeSubdomains", "ignoreQueryParameters", "limit",
        "timeout", "location", "threatProtection", "ignoreSitemap", *_COMMON,
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class MapPlan:
    """`POST /v2/map`: the seed page is rendered once (its links), the sitemap read, and
    nothing else: a deep crawl of one page whose frontier records are the answer."""

    url: str
    sitemap: str
    search: str | None
    limit: int
    include_subdomains: bool
    timeout_ms: int | None
    spec: CrawlSpec
    options: CrawlOptions


def map_plan(body: Mapping[str, Any], *, limits: Limits) -> MapPlan:
    _unknown(body, _MAP_KEYS, ())
    url = _url(body.get("url"), ("url",))
    _refuse_set(body, ("location", "threatProtection"), ())
    sitemap = body.get("sitemap") or (
        "skip" if _bool(body, "ignoreSitemap", default=False) else "include"
    )
    if sitemap not in {"include", "skip", "only"}:
        raise bad_request(Detail(path=("sitemap",), message="one of include, skip, only"))
    limit = _int(body, "limit", default=MAP_LIMIT, low=1)
    if limit > MAP_MAX_LIMIT:
        raise bad_request(Detail(path=("limit",), message=f"at most {MAP_MAX_LIMIT}"))
    subdomains = _bool(body, "includeSubdomains", default=True)
    search = body.get("search")
    if search is not None and not isinstance(search, str):
        raise bad_request(Detail(path=("search",), message="a string is expected"))
    timeout = body.get("timeout")
    if timeout is not None and (not isinstance(timeout, int) or timeout < 1000):  # noqa: PLR2004
        raise bad_request(Detail(path=("timeout",), message="milliseconds, at least 1000"))
    spec = CrawlSpec(
        max_pages=1,
        max_depth=1,
        scope="domain" if subdomains else "host",
        sitemap=sitemap != "skip",
        ignore_query=_bool(body, "ignoreQueryParameters", default=True),
    )
    options = CrawlOptions(formats=(Format.LINKS,), render="auto")
    del limits
    return MapPlan(
        url=url,
        sitemap=sitemap,
        search=search or None,
        limit=limit,
        include_subdomains=subdomains,
        timeout_ms=timeout,
        spec=spec,
        options=options,
    )
