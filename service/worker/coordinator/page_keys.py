"""The key of a page task on the pages topic: its host, so one fetcher owns each host.

Keying by host (StormCrawler's partitioning by host, domain or IP) puts all pages of a host
on one partition, so the fetcher that owns it applies the per-host limit, pacing,
robots.txt and Retry-After backoff for the whole group. An operator may spread a host of
their own over several fetchers on purpose (`CRAWL_HOST_SHARDS`). A request with a
`session` keys its pages by the session instead: one fetcher holds its browser context.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from service.net.hosts import host_key, site_of

if TYPE_CHECKING:
    from service.contracts import CrawlOptions
    from service.settings import Settings


def page_key(url: str, options: CrawlOptions, settings: Settings) -> str:
    """`host`, `host#shard` for a sharded host, or `session:name`."""
    if options.session is not None:
        return f"session:{options.session}"
    key = site_of(url) if settings.page_key == "domain" else host_key(url)
    shards = settings.host_shards.get(key, 1)
    if shards <= 1:
        return key
    digest = hashlib.blake2b(url.encode(), digest_size=8).digest()
    return f"{key}#{int.from_bytes(digest, 'big') % shards}"
