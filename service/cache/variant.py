"""The cache key of a page: its normalised URL and every option that changes what comes back.

Options that carry identity (headers, cookies, a session, a proxy, actions, credentials in
the URL) keep a request out of the shared cache altogether (`bypass_reason`): what one
caller's identity fetched never answers another's request. So does `skip_tls_verification`:
a page fetched without checking its certificate may come from anyone on the path, and it
never answers a request that checks. Options that only shape the
outputs (formats, main content, tags, extraction) are not in the key: an entry stores the
whole rendered document and each request derives its own outputs from it.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from service.frontier.urls import normalise

if TYPE_CHECKING:
    from pydantic import JsonValue

    from service.contracts import CrawlOptions

GATEWAY_MARKERS: Final = ("firecrawl", "firecrawl_scrape")
"""The keys of the gateway's markers in a request's metadata (a job's, a scrape's or a
map's): each names the tenant."""

KEY_VERSION: Final = 1
"""Bumped when what goes into a key changes: old entries then simply stop matching."""

VARIANT_FIELDS: Final = (
    "render",
    "device",
    "viewport",
    "user_agent",
    "locale",
    "timezone",
    "geolocation",
    "wait_for",
    "wait_until",
    "javascript",
    "block_resources",
    "screenshot_full_page",
)
"""The options whose value changes the rendered document (or its screenshot)."""


def bypass_reason(url: str, options: CrawlOptions) -> str | None:
    """Why a request may neither read nor fill the shared cache, or None when it may."""
    parts = urlsplit(url)
    checks = (
        (bool(options.headers), "headers"),
        (bool(options.cookies), "cookies"),
        (options.session is not None, "session"),
        (options.proxy is not None, "proxy"),
        (bool(options.actions), "actions"),
        (options.skip_tls_verification, "skip_tls_verification"),
        (parts.username is not None or parts.password is not None, "credentials in the URL"),
    )
    return next((why for present, why in checks if present), None)


def cache_key(url: str, options: CrawlOptions, *, scope: str = "") -> str:
    """The hex key of the page variant `options` asks for (`scope` separates tenants)."""
    variant = options.model_dump(mode="json", include=set(VARIANT_FIELDS))
    material = {
        "v": KEY_VERSION,
        "scope": scope,
        "url": normalise(url) or url,
        "variant": variant,
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def tenant_scope(metadata: dict[str, JsonValue]) -> str:
    """The tenant a request's entries are kept apart under (`CRAWL_CACHE_SCOPE=tenant`): the
    gateway tenant its marker names, else the `tenant` a producer put in its metadata, else
    none (requests naming no tenant share their scope)."""
    markers = (metadata.get(key) for key in GATEWAY_MARKERS)
    marker = next((found for found in markers if isinstance(found, dict)), None)
    named = marker.get("tenant") if marker is not None else metadata.get("tenant")
    return f"tenant:{named}" if isinstance(named, str) else "tenant:"
