"""The job view: every gateway job known from the requests topic, with its progress folded
from the progress topic. Each replica keeps one, rebuilt from the topics at start, so any
replica answers for any job. Pure: `view_reader.py` feeds it."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from service.contracts import EventType
from service.sealing.marker_auth import verified

if TYPE_CHECKING:
    from service.contracts import ProgressEvent

MARKER_KEY: Final = "firecrawl"
"""The key of a gateway job's marker in `CrawlRequest.metadata` (echoed on every event)."""

JobKind = Literal["scrape", "crawl", "batch", "map"]
"""`crawl` and `batch` are jobs callers poll; `scrape` and `map` are synchronous calls, in the
view only so that they count against the tenant's concurrent jobs."""

State = Literal["scraping", "completed", "failed", "cancelled"]

MAX_ORPHAN_REJECTIONS: Final = 10_000
"""`rejected` events kept whose request is not (yet) in the view: a worker rejects a request
before reading its metadata, so the event names the job by its id only."""

CALLS: Final = frozenset({"scrape", "map"})
"""Kinds answered in the call: forgotten once ended (nobody asks for them by id again)."""

MAX_ENDED_CALLS: Final = 100_000
"""Ended calls remembered so that their request record, read after their end (the two
topics are read side by side), does not bring them back as running."""

PAGE_WINDOW: Final = timedelta(minutes=1)
"""How far back the view keeps each tenant's page instants (`pages_per_minute`)."""

_PAGE_EVENTS: Final = frozenset({EventType.PAGE_SUCCEEDED, EventType.PAGE_FAILED})

_STATES: Final[dict[EventType, State]] = {
    EventType.COMPLETED: "completed",
    EventType.CANCELLED: "cancelled",
    EventType.FAILED: "failed",
    EventType.EXPIRED: "failed",
    EventType.REJECTED: "failed",
}
"""Firecrawl's state for each terminal event; every other event is `scraping`."""


class JobMarker(BaseModel):
    """What the gateway puts in a request's metadata: enough for any replica to answer."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: JobKind
    url: str
    """The seed (crawl) or the first URL (batch, scrape)."""
    tenant: str
    created_at: datetime
    results_partition: int = 0
    results_offset: int = 0
    """Where the job's results start: the partition's end just before the request was
    produced (nothing of the job can be earlier); 0 for `scrape` and `map`."""
    formats: tuple[str, ...]
    full_page: bool = False
    remove_base64_images: bool = True
    warning: str | None = None
    options: dict[str, JsonValue] = {}
    """The options as given (echoed by `GET /v2/crawl/active`)."""

    @classmethod
    def of(cls, metadata: dict[str, Any]) -> JobMarker | None:
        """The marker in a request's (or an event's echoed) metadata, if it is a job's."""
        raw = metadata.get(MARKER_KEY)
        return cls.model_validate(raw) if isinstance(raw, dict) else None

    @classmethod
    def authentic(
        cls, secret: bytes, request_id: str, metadata: dict[str, Any]
    ) -> JobMarker | None:
        """The marker of `request_id`'s metadata when the gateway signed it (else None: a
        forged or copied marker makes no job of any tenant); a signed one that does not
        parse is None too."""
        raw = verified(secret, request_id, metadata.get(MARKER_KEY))
        if raw is None:
            return None
        try:
            return cls.model_validate(raw)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """The latest event of the latest run of a job."""

    run_id: str
    seq: int
    type: EventType
    total: int
    succeeded: int
    failed: int
    cancelled: int

    @classmethod
    def of(cls, event: ProgressEvent) -> Progress:
        return cls(
            run_id=event.run_id,
            seq=event.seq,
            type=event.type,
            total=event.total,
            succeeded=event.succeeded,
            failed=event.failed,
            cancelled=event.cancelled,
        )

    def then(self, event: ProgressEvent) -> Progress:
        """This progress after `event`: a later event of the run, or a new run (a redelivery,
        whose events start at seq 0); a late event of an older run changes nothing."""
        if event.run_id == self.run_id:
            return Progress.of(event) if event.seq > self.seq else self
        return Progress.of(event) if event.seq == 0 else self


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """A job as Firecrawl reports it."""

    id: str
    marker: JobMarker
    state: State
    total: int
    completed: int
    """Pages with a successful document (Firecrawl counts failed pages apart: `/errors`)."""

    @property
    def terminal(self) -> bool:
        return self.state != "scraping"


@dataclass(slots=True)
class JobView:
    """The jobs of every replica, folded from the topics; a marker counts only when signed
    with `secret`."""

    secret: bytes = b""
    _jobs: dict[str, JobMarker] = field(default_factory=dict)
    _rejected: OrderedDict[str, Progress] = field(default_factory=OrderedDict)
    _withdrawn: set[str] = field(default_factory=set)
    _ended_calls: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _progress: dict[str, Progress] = field(default_factory=dict)
    _pages: dict[str, deque[datetime]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._jobs)

    def submitted(self, job_id: str, marker: JobMarker) -> None:
        if job_id not in self._ended_calls:
            self._jobs.setdefault(job_id, marker)

    def progressed(self, event: ProgressEvent) -> None:
        """Fold an event; events of requests that are not gateway jobs are ignored (a
        `rejected` one is kept a while: it echoes no metadata)."""
        marker = JobMarker.authentic(self.secret, event.request_id, event.request_metadata)
        if marker is None and event.request_id not in self._jobs:
            if event.type == EventType.REJECTED:
                self._orphan(event)
            return
        if event.type in _PAGE_EVENTS and marker is not None:
            self._page_done(marker.tenant, event)
        current = self._progress.get(event.request_id)
        self._progress[event.request_id] = (
            Progress.of(event) if current is None else current.then(event)
        )
        kind = marker.kind if marker is not None else self._jobs[event.request_id].kind
        if event.is_terminal and kind in CALLS:
            self._forget(event.request_id)

    def _forget(self, job_id: str) -> None:
        """An ended scrape or map: out of the view, its id remembered a while."""
        self._jobs.pop(job_id, None)
        self._progress.pop(job_id, None)
        self._withdrawn.discard(job_id)
        self._ended_calls[job_id] = None
        while len(self._ended_calls) > MAX_ENDED_CALLS:
            self._ended_calls.popitem(last=False)

    def recent_pages(self, tenant: str) -> list[datetime]:
        """When the tenant's latest pages finished (those within a minute of the newest)."""
        return list(self._pages.get(tenant, ()))

    def withdrawn(self, job_id: str) -> None:
        """The gateway cancelled `job_id` at admission: ended here before its events say so."""
        self._withdrawn.add(job_id)

    def _orphan(self, event: ProgressEvent) -> None:
        self._rejected[event.request_id] = Progress.of(event)
        while len(self._rejected) > MAX_ORPHAN_REJECTIONS:
            self._rejected.popitem(last=False)

    def _page_done(self, tenant: str, event: ProgressEvent) -> None:
        instants = self._pages.setdefault(tenant, deque())
        instants.append(event.at)
        newest = max(instants[-1], event.at)
        while instants and newest - instants[0] >= PAGE_WINDOW:
            instants.popleft()

    def status(self, job_id: str) -> JobStatus | None:
        marker = self._jobs.get(job_id)
        if marker is None:
            return None
        progress = self._progress.get(job_id) or self._rejected.get(job_id)
        if job_id in self._withdrawn and (progress is None or progress.type not in _STATES):
            return JobStatus(id=job_id, marker=marker, state="cancelled", total=0, completed=0)
        if progress is None:
            return JobStatus(id=job_id, marker=marker, state="scraping", total=0, completed=0)
        return JobStatus(
            id=job_id,
            marker=marker,
            state=_STATES.get(progress.type, "scraping"),
            total=progress.total,
            completed=progress.succeeded,
        )

    def active(self, *, tenant: str | None = None, kind: JobKind | None = None) -> list[JobStatus]:
        """Jobs not ended yet, oldest first (of one tenant and kind when given)."""
        found = [
            status
            for job_id, marker in self._jobs.items()
            if (tenant is None or marker.tenant == tenant) and (kind is None or marker.kind == kind)
            if (status := self.status(job_id)) is not None and not status.terminal
        ]
        return sorted(found, key=_rank)

    def ahead_of(self, job_id: str, tenant: str, *, forfeit: bool = False) -> int:
        """The tenant's jobs not ended that rank before `job_id` (by creation, then id): the
        order every replica agrees on once it has read both requests. `forfeit`: the job
        gave up its rank, every other running job of the tenant is ahead."""
        mine = self.status(job_id)
        if mine is None:
            return 0
        return sum(
            1
            for other in self.active(tenant=tenant)
            if other.id != job_id and (forfeit or _rank(other) < _rank(mine))
        )


def _rank(status: JobStatus) -> tuple[datetime, str]:
    return (status.marker.created_at, status.id)
