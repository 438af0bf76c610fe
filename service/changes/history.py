"""A tracked page's history: its key, its record on Kafka, and the store interface.

The history of a page variant under one tag is its newest observation, one record keyed by
the history key on a compacted topic co-partitioned with the pages topic (the fetcher that
owns a host owns its histories, as it owns its cache entries). The record's value is the
observation with its Markdown, compressed; its headers carry what a comparison needs
first (the hash, the fetch time), so a fetcher that takes a partition over indexes it
without decompressing a single value.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from service.cache.variant import cache_key
from service.contracts import SCHEMA_VERSION, Timestamp

if TYPE_CHECKING:
    from service.changes.compare import History
    from service.contracts import ChangeTracking, CrawlOptions

KEY_VERSION: Final = 1
"""Bumped when what goes into a history key changes: old histories then stop matching."""


def history_key(url: str, options: CrawlOptions, tracking: ChangeTracking, *, scope: str) -> str:
    """The hex key of a page's history: its tag, its tenant `scope`, its page variant (as the
    page cache keys it) and what the request reads of it (shaping and `ignore`), since a
    page read differently is compared with nothing it was read as before."""
    material = {
        "v": KEY_VERSION,
        "tag": tracking.tag,
        "variant": cache_key(url, options, scope=scope),
        "reading": [
            options.only_main_content,
            sorted(options.include_tags),
            sorted(options.exclude_tags),
            sorted(tracking.ignore),
        ],
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class PriorObservation(BaseModel):
    """The observation a history's newest one was compared with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fetched_at: Timestamp
    sha256: str | None
    markdown: str | None = None


class HistoryRecord(BaseModel):
    """Value of the history topic: a page's newest observation under one tag, and the one
    it was compared with (for a redelivery of the result that made it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    key: str
    url: str
    tag: str | None = None
    result_id: str
    """The result that made this observation."""
    fetched_at: Timestamp
    sha256: str | None
    """Of the page's reading (None: the page was gone, 404 or 410)."""
    markdown: str | None = None
    before: PriorObservation | None = None


class HistoryStore(Protocol):
    """Where a fetcher finds and keeps histories, by page partition."""

    async def find(self, partition: int, key: str) -> History | None:
        """The newest observations of `key`, without their Markdown."""
        ...

    async def markdown(self, partition: int, key: str, *, before: bool = False) -> str | None:
        """The Markdown of the newest observation of `key`, or of the one `before` it
        (None: not kept)."""
        ...

    async def put(self, partition: int, record: HistoryRecord) -> None: ...
