"""Monitors: a schedule and its targets as a compacted record (`CRAWL_MONITORS_TOPIC`, keyed
by monitor id), and each monitor's last fired tick (`CRAWL_MONITOR_TICKS_TOPIC`, written by
the coordinator that owns it). Part of the wire contract; see docs/monitors.md."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints

from service.contracts import SCHEMA_VERSION, CrawlOptions, CrawlSpec, Timestamp

MonitorId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""A monitor's id (no `.`: a check's request ids are `<check id>.<target index>`)."""

METADATA_KEY: Final = "monitor"
"""The key of a check request's `MonitorCheckMarker` in its metadata."""

MAX_TARGETS: Final = 20
"""Targets of one monitor at most (each is one request per check)."""


class ScheduleSpec(BaseModel):
    """Exactly one of `cron` (5 fields) and `text` (`every 5 minutes`, `hourly`, `daily at
    9:00`...), in `timezone` (an IANA name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cron: str | None = Field(default=None, max_length=256)
    text: str | None = Field(default=None, max_length=256)
    timezone: str = Field(default="UTC", max_length=64)


class AdaptiveSpec(BaseModel):
    """An adaptive interval for a target (StormCrawler's rule): after a check in which the
    target changed, its interval halves toward `min_interval_s`, otherwise it grows by half
    toward `max_interval_s`; the target is checked at the first tick its interval allows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_interval_s: int = Field(ge=1)
    max_interval_s: int = Field(ge=1)


class MonitorTarget(BaseModel):
    """What one check fetches: `scrape` the `urls`, or `crawl` from `urls[0]` with `crawl`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=64)
    type: Literal["scrape", "crawl"]
    urls: tuple[str, ...] = Field(min_length=1)
    options: CrawlOptions = CrawlOptions()
    """The pages' options; `change_tracking` is always set, under the monitor's tag."""
    crawl: CrawlSpec | None = None
    """The crawl's spec (`type: crawl`)."""
    adaptive: AdaptiveSpec | None = None
    """Checked on fewer ticks while it does not change (null: on every tick)."""


class MonitorRecord(BaseModel):
    """A monitor, keyed by its id on the compacted monitors topic; a tombstone deletes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    id: MonitorId
    name: str = Field(min_length=1, max_length=256)
    tenant: str | None = None
    """The gateway tenant that owns it (null: a Kafka producer's)."""
    schedule: ScheduleSpec
    targets: tuple[MonitorTarget, ...] = Field(min_length=1, max_length=MAX_TARGETS)
    webhook: dict[str, JsonValue] | None = None
    """Put as `metadata.webhook` on every check request (plain or sealed by a gateway)."""
    retention_days: int = Field(default=30, ge=1, le=3650)
    """How long its checks are listed."""
    status: Literal["active", "paused"] = "active"
    tag: str = Field(min_length=1, max_length=128)
    """The change-tracking tag of its checks (its pages' history is kept under it)."""
    created_at: Timestamp
    updated_at: Timestamp
    schedule_since: Timestamp
    """When its schedule last took effect (created, rescheduled, resumed): no earlier tick
    fires."""
    sig: str | None = Field(default=None, max_length=128)
    """The gateway's signature of the record (`CRAWL_GATEWAY_SECRET`, over every other
    field): a record naming a tenant without it is no tenant's and does not fire."""


class PlannedRequest(BaseModel):
    """One request of a fired tick and where its successor would look for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str
    partition: int = Field(ge=0)
    offset_before: int = Field(ge=0)
    """The requests partition's end just before the request was produced."""
    target_id: str = ""
    results_offset: int = Field(default=0, ge=0)
    """Its results partition's end before it was produced (where its results start)."""
    progress_offset: int = Field(default=0, ge=0)
    """Its progress partition's end before it was produced (where its events start)."""


MAX_SKIPPED: Final = 100
"""Skipped ticks a tick record keeps (the newest): the gateway lists them as checks."""


class SkippedCheck(BaseModel):
    """A tick that fell while the monitor's previous check still ran: a check with status
    `skipped_overlap` that produced no request (Firecrawl's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    monitor_id: MonitorId
    check_id: str
    scheduled_for: Timestamp
    at: Timestamp
    """When the owner skipped it."""
    tenant: str | None = None
    sig: str | None = Field(default=None, max_length=128)
    """Signed as a check marker (`CRAWL_GATEWAY_SECRET`): the gateway lists only these."""


class MonitorTick(BaseModel):
    """The last tick a monitor's owner fired, keyed by monitor id on the compacted ticks
    topic: first its intent (`produced` false), then the same tick `produced`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    monitor_id: MonitorId
    scheduled_for: Timestamp
    check_id: str
    requests: tuple[PlannedRequest, ...]
    produced: bool = False
    fired_at: Timestamp
    intervals: dict[str, int] = Field(default_factory=dict)
    """Per adaptive target id: its interval in seconds after this tick."""
    checked: dict[str, Timestamp] = Field(default_factory=dict)
    """Per adaptive target id: the tick it was last checked at."""
    skipped: tuple[SkippedCheck, ...] = Field(default=(), max_length=MAX_SKIPPED)
    """The newest ticks skipped because the previous check still ran. After a skip,
    `scheduled_for` is the skipped tick while `check_id` and `requests` stay the running
    check's (the next tick looks at it again)."""


class CheckPart(BaseModel):
    """One request of a check as every request of it names them: the webhook dispatcher
    sends the check's `monitor.check.completed` once each has ended, with the summary of
    all their results."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str
    results_offset: int = Field(default=0, ge=0)
    """Its results partition's end before it was produced."""
    progress_offset: int = Field(default=0, ge=0)
    """Its progress partition's end before it was produced."""


class MonitorCheckMarker(BaseModel):
    """What a check request carries in `metadata.monitor`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    monitor_id: str
    check_id: str
    target_id: str
    trigger: Literal["scheduled", "manual"]
    scheduled_for: Timestamp | None = None
    tenant: str | None = None
    results_offset: int = Field(default=0, ge=0)
    """The end of the request's results partition just before it was produced: its results
    are read from there."""
    parts: tuple[CheckPart, ...] = Field(default=(), max_length=MAX_TARGETS)
    """Every request of the check, this one included (empty: this one is the check)."""
    sig: str | None = Field(default=None, max_length=128)
    """The signature over the request id and this marker (`CRAWL_GATEWAY_SECRET`, as a
    gateway job's marker): without it the request is no check of any monitor."""
