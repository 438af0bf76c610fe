"""The records that travel between the roles and back to the producer: `ProgressEvent`,
`ControlMessage`, `FrontierRecord`, `PageTask`; how every message is dumped, and the
schema of each."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    RootModel,
    StringConstraints,
)

from service.contracts.base import SCHEMA_VERSION, RequestId, Timestamp, _Untrusted, utc_now
from service.contracts.options import CrawlOptions, CrawlRequest
from service.contracts.results import PageResult, RecordSource


class EventType(StrEnum):
    ACCEPTED = "accepted"
    PAGE_SUCCEEDED = "page_succeeded"
    PAGE_FAILED = "page_failed"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


TERMINAL_EVENTS: Final = frozenset(
    {
        EventType.COMPLETED,
        EventType.FAILED,
        EventType.REJECTED,
        EventType.CANCELLED,
        EventType.EXPIRED,
    }
)


class ProgressEvent(BaseModel):
    """Progress of one run of a request, written to the progress topic, keyed by request_id."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: str
    run_id: str
    seq: int = Field(ge=0)
    """0, 1, 2, ... within a run, without gaps."""
    type: EventType
    total: int = Field(ge=0)
    """Pages the run will give a result for; a deep crawl's grows as URLs are admitted."""
    succeeded: int = Field(ge=0)
    failed: int = Field(ge=0)
    cancelled: int = Field(default=0, ge=0)
    """Pages that got a `cancelled` result (not counted in `failed`); at the terminal event
    succeeded + failed + cancelled is the number of results of the run."""
    at: Timestamp
    worker: str
    """The coordinator (`CRAWL_WORKER_NAME`) of the run: it sends every event of the run."""
    detail: str | None = None
    url: str | None = None
    """The page, on page events."""
    result_id: str | None = None
    """The page's result, on page events."""
    request_metadata: dict[str, JsonValue] = Field(default_factory=dict)
    source: RecordSource | None = None
    """The request record this run answers (null only from workers before this field)."""
    discovered: int | None = None
    """Deep crawls: unique URLs in scope known so far (admitted or not); null otherwise."""

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_EVENTS


MAX_REASON_CHARS: Final = 500
"""Longest `reason` a control message may carry (it is echoed in the terminal event)."""


class CancelControl(_Untrusted):
    """Stop a request: running pages are closed, the others get `cancelled` results."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["cancel"] = "cancel"
    request_id: RequestId
    reason: Annotated[str, StringConstraints(max_length=MAX_REASON_CHARS)] | None = None
    """Short, human-readable; echoed in the `detail` of the terminal `cancelled` event."""
    at: Timestamp = Field(default_factory=utc_now)
    """When the cancel was issued; it is remembered for `CRAWL_CANCEL_RETENTION` from then."""


class ControlMessage(RootModel[Annotated[CancelControl, Field(discriminator="type")]]):
    """A message of the compacted control topic, keyed by request_id. A discriminated union
    on `type` (only `cancel` so far): a reader skips kinds it does not know."""


class FrontierRecord(BaseModel):
    """A deep crawl's durable progress, written by the job's owner to the frontier topic,
    keyed by request_id: the sitemap it read, and each finished page's candidate links. The
    next owner of the job replays them (see docs/job-control.md, "Deep crawl"). A record larger than
    one message travels as ordered chunks, as large results do."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: str
    source: RecordSource
    """The request record of the job: records of another submission that reused the
    request_id are not this job's."""
    kind: Literal["sitemap", "page", "dispatched"]
    url: str | None = None
    """The page (as the run named it: normalised in a deep crawl), on `page` records."""
    outcome: Literal["succeeded", "failed", "cancelled"] | None = None
    """The page's result, on `page` records (written by the fetcher that rendered it, only
    after the result was acknowledged)."""
    links: tuple[str, ...] = ()
    """`page`: the page's links a deep crawl may follow (document order; the coordinator
    keeps the candidates: normalised, in scope); `sitemap`: the sitemap's pages the budget
    can admit (normalised, in scope, new, in order; at most `max_pages` less the seeds);
    `dispatched`: pages the coordinator put on the page topic (acknowledged), whose
    `page` records a next coordinator waits for instead of dispatching them again."""
    run_id: str | None = None
    """The run whose page task this record answers (`page`), or that dispatched (`dispatched`)."""
    error_code: str | None = None
    """`page`: the error code of a failed page."""
    left_out: int = Field(default=0, ge=0)
    """`sitemap`: unique in-scope URLs the sitemap listed beyond the budget (not admitted)."""
    beyond: tuple[str, ...] = ()
    """`sitemap`: the first 5,000 of those URLs (normalised, in order), never admitted: for
    what lists a site's URLs without crawling them (the gateway's `map`)."""
    canonical: str | None = None
    """The page's canonical URL (normalised), when the crawl merges canonicals."""


class FollowLinks(BaseModel):
    """A deep-crawl page task asks for the page's links (it is below `max_depth`)."""

    model_config = ConfigDict(frozen=True)

    respect_nofollow: bool = True


class PageTask(BaseModel):
    """One page to render, on the page topic, keyed by the page's host (or registered
    domain): written by the coordinator of its run, read by the fetcher that owns the host.

    The fetcher answers with the page's `PageResult` (results topic) and then a `page`
    `FrontierRecord` (frontier topic), both keyed by request_id; its offset commits only
    after both are acknowledged."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: str
    run_id: str
    url: str
    options: CrawlOptions
    source: RecordSource
    """The request record of the run."""
    request_metadata: dict[str, JsonValue] = Field(default_factory=dict)
    depth: int = Field(default=0, ge=0)
    parent_url: str | None = None
    follow: FollowLinks | None = None
    """Set on deep-crawl pages below `max_depth`: the fetcher returns the page's links."""
    delay_ms: int = Field(default=0, ge=0)
    """Pacing of this run's pages of one host (`crawl.delay_ms`), kept by the fetcher."""
    deadline_at: Timestamp | None = None
    """When the run's `deadline_ms` runs out: the page stops there (`deadline`)."""
    priority: int = 0
    """Order of the run at its coordinator (lower first): slots go to older runs first."""
    last: bool = False
    """No page of this run is dispatched after this one (a list crawl's last): the fetcher
    hands the run's browser context back as soon as its pages there are done."""


def dump(message: BaseModel) -> bytes:
    """The wire form of a message: compact JSON in UTF-8."""
    return message.model_dump_json(exclude_none=False).encode()


def dump_request(request: CrawlRequest) -> bytes:
    """A request's wire form without the fields at their defaults (and `schema_version`
    always): a request that uses no option added in a later version is accepted by the
    workers of an earlier one, which reject unknown fields (a rolling upgrade)."""
    document = {"schema_version": SCHEMA_VERSION} | request.model_dump(
        mode="json", exclude_defaults=True
    )
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


MESSAGE_MODELS: Final[dict[str, type[BaseModel]]] = {
    "CrawlRequest": CrawlRequest,
    "PageResult": PageResult,
    "ProgressEvent": ProgressEvent,
    "ControlMessage": ControlMessage,
    "FrontierRecord": FrontierRecord,
    "PageTask": PageTask,
}


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(mode="validation")
