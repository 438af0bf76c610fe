"""The two records of a cache entry on Kafka: a small index record and the stored page.

Both live in compacted topics keyed by the cache key, on the partition of the page topic
that the page's host is placed on, so the fetcher that owns a host owns its entries. The
index record points at the offset of its body record: compaction never moves offsets, so
the pointer to the newest body stays valid, and a fetcher that takes a partition over
rebuilds the index by reading small records only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.contracts import SCHEMA_VERSION, RenderedBy, Timestamp


class CacheIndexRecord(BaseModel):
    """Value of the index topic: where an entry's body is and what it holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    key: str
    url: str
    """The URL asked for (purges by URL and host read it)."""
    fetched_at: Timestamp
    """When the stored document was fetched (a 304 does not change it)."""
    validated_at: Timestamp
    """When the site last confirmed it: the fetch, or the latest 304."""
    body_offset: int = Field(ge=0)
    """Offset of the body record on the same partition of the bodies topic."""
    etag: str | None = None
    last_modified: str | None = None
    content_sha256: str
    has_screenshot: bool = False


class StoredPage(BaseModel):
    """Value of the bodies topic: the rendered document and what came with it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    key: str
    url: str
    final_url: str
    status_code: int
    html: str
    screenshot: str | None = None
    rendered_by: RenderedBy | None = None
    fetched_at: Timestamp
