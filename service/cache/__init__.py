"""The page cache: entries keyed by page variant, kept in Kafka beside the host that owns them.

See docs/cache.md. A pure core (`variant`, `freshness`), the records, a store interface with
its Kafka version, and `PageCache`, which a fetcher wraps each page's fetch with.
"""

from service.cache.freshness import Validators, Worth, storable, worth
from service.cache.pages import CachedPage, PageCache
from service.cache.records import CacheIndexRecord, StoredPage
from service.cache.store import CacheStore, KafkaCacheStore
from service.cache.variant import bypass_reason, cache_key, tenant_scope

__all__ = [
    "CacheIndexRecord",
    "CacheStore",
    "CachedPage",
    "KafkaCacheStore",
    "PageCache",
    "StoredPage",
    "Validators",
    "Worth",
    "bypass_reason",
    "cache_key",
    "storable",
    "tenant_scope",
    "worth",
]
