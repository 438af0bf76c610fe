"""`POST /v2/map`: its body as a one-page deep crawl, and its answer from that crawl's
frontier records. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from service.contracts import CrawlOptions, CrawlSpec, Format
from service.gateway._fields import COMMON_KEYS, bool_of, int_of, refuse_set, refuse_unknown, url_of
from service.gateway.errors import Detail, bad_request
from service.net.hosts import host_key

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from service.contracts import FrontierRecord


MAP_LIMIT: Final = 5000
"""Firecrawl's default `limit` of `POST /v2/map`."""

MAP_MAX_LIMIT: Final = 100_000
"""Firecrawl's largest `limit` of `POST /v2/map`."""

_MAP_KEYS: Final = frozenset(
    {
        "url", "search", "sitemap", "includeSubdomains", "ignoreQueryParameters", "limit",
        "timeout", "location", "threatProtection", "ignoreSitemap", *COMMON_KEYS,
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


def map_plan(body: Mapping[str, Any]) -> MapPlan:
    refuse_unknown(body, _MAP_KEYS, ())
    url = url_of(body.get("url"), ("url",))
    refuse_set(body, ("location", "threatProtection"), ())
    sitemap = body.get("sitemap") or (
        "skip" if bool_of(body, "ignoreSitemap", default=False) else "include"
    )
    if sitemap not in {"include", "skip", "only"}:
        raise bad_request(Detail(path=("sitemap",), message="one of include, skip, only"))
    limit = int_of(body, "limit", default=MAP_LIMIT, low=1)
    if limit > MAP_MAX_LIMIT:
        raise bad_request(Detail(path=("limit",), message=f"at most {MAP_MAX_LIMIT}"))
    subdomains = bool_of(body, "includeSubdomains", default=True)
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
        ignore_query=bool_of(body, "ignoreQueryParameters", default=True),
    )
    options = CrawlOptions(formats=(Format.LINKS,), render="auto")
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


def map_links(plan: MapPlan, records: Sequence[FrontierRecord]) -> list[str]:
    """The seed, the links of its page and the sitemap's URLs (as `plan.sitemap` says), on
    the seed's host (or its subdomains), matching `search`, unique, at most `limit`."""
    sitemap = [
        url
        for record in records
        if record.kind == "sitemap"
        for url in (*record.links, *record.beyond)
    ]
    page = [url for record in records if record.kind == "page" for url in record.links]
    if plan.sitemap == "only":
        found = sitemap
    elif plan.sitemap == "skip":
        found = [plan.url, *page]
    else:
        found = [plan.url, *page, *sitemap]
    kept = [url for url in dict.fromkeys(found) if _on_site(url, plan) and _matches(url, plan)]
    return kept[: plan.limit]


def _on_site(url: str, plan: MapPlan) -> bool:
    host = host_key(url)
    seed = host_key(plan.url)
    if host == seed:
        return True
    base = seed.removeprefix("www.")
    return plan.include_subdomains and (host == base or host.endswith(f".{base}"))


def _matches(url: str, plan: MapPlan) -> bool:
    return plan.search is None or plan.search.lower() in url.lower()
