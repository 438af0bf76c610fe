"""The answer of `POST /v2/map` from a one-page deep crawl's frontier records. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from service.contracts import FrontierRecord
    from service.gateway.mapping import MapPlan


def map_links(plan: MapPlan, records: Sequence[FrontierRecord]) -> list[str]:
    """The seed, the links of its page and the sitemap's URLs (as `plan.sitemap` says), on
    the seed's host (or its subdomains), matching `search`, unique, at most `limit`."""
    sitemap = [url for record in records if record.kind == "sitemap" for url in record.links]
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
    host = (urlsplit(url).hostname or "").lower()
    seed = (urlsplit(plan.url).hostname or "").lower()
    if host == seed:
        return True
    base = seed.removeprefix("www.")
    return plan.include_subdomains and (host == base or host.endswith(f".{base}"))


def _matches(url: str, plan: MapPlan) -> bool:
    return plan.search is None or plan.search.lower() in url.lower()
