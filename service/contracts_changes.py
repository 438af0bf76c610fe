"""The change feed's record (`CRAWL_CHANGES_TOPIC`): one per tracked page that is `new`,
`changed` or `removed`, keyed by the page's URL. Part of the wire contract (`contracts/`
holds the option and the result field)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.contracts import SCHEMA_VERSION, RecordSource, Timestamp


class ChangeRecord(BaseModel):
    """A page that changed since its previous observation under its tag, on the change topic,
    keyed by its URL (every change of one URL on one partition, in order). Written at least
    once: a page fetched again after a redelivery may write its change again (same
    `result_id`, same hashes)."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    url: str
    status: Literal["new", "changed", "removed"]
    tag: str | None = None
    """The request's `change_tracking.tag`."""
    request_id: str
    result_id: str
    """The `result_id` of the page's `PageResult`."""
    run_id: str
    source: RecordSource | None = None
    """The request record of the run."""
    fetched_at: Timestamp
    """When the content compared was fetched (for a cache hit: the entry's fetch)."""
    previous_fetched_at: Timestamp | None = None
    """When the previous observation was fetched (null for `new`)."""
    content_sha256: str | None = None
    """SHA-256 of the page's normalised content (null for `removed`)."""
    previous_sha256: str | None = None
    """SHA-256 of the previous observation's normalised content (null for `new`)."""
    diff_bytes: int = Field(default=0, ge=0)
    """UTF-8 size of the unified diff of the Markdown (0 when none was made)."""
