"""The gateway's view of monitors and their checks, folded from the monitors topic (records,
tombstones), the requests topic (check requests, by their `metadata.monitor` marker) and the
progress topic (their runs' events). Pure: `view_reader.py` feeds it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from service.contracts import EventType
from service.contracts_monitors import METADATA_KEY, MonitorRecord, MonitorTick
from service.monitors.signing import authentic_marker, record_authentic, skip_authentic

if TYPE_CHECKING:
    from datetime import datetime

    from service.contracts import ProgressEvent

CheckState = Literal["queued", "running", "completed", "failed", "partial", "skipped_overlap"]


@dataclass(slots=True, kw_only=True)
class CheckRequest:
    """One target's request of a check: where its results start and how its run ends."""

    request_id: str
    target_id: str
    results_offset: int
    state: Literal["queued", "running", "completed", "failed"] = "queued"
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(slots=True, kw_only=True)
class Check:
    """A check of a monitor: its requests (one per target) as far as they are known."""

    id: str
    monitor_id: str
    trigger: Literal["scheduled", "manual"]
    scheduled_for: datetime | None
    created_at: datetime
    requests: dict[str, CheckRequest] = field(default_factory=dict)
    tenant: str | None = None
    skipped: bool = False
    """A tick that fell while the previous check ran: no request (`skipped_overlap`)."""

    @property
    def state(self) -> CheckState:
        if self.skipped:
            return "skipped_overlap"
        states = {request.state for request in self.requests.values()}
        if not states or states == {"queued"}:
            return "queued"
        if states <= {"completed", "failed"}:
            if states == {"completed"}:
                return "completed"
            return "failed" if states == {"failed"} else "partial"
        return "running"

    @property
    def terminal(self) -> bool:
        return self.state in {"completed", "failed", "partial", "skipped_overlap"}

    def snapshot(self) -> Check:
        """The check as it is now, kept while its pages are read: a check that ends during
        the read is answered as it was before (its pages all precede its end)."""
        requests = {rid: replace(request) for rid, request in self.requests.items()}
        return replace(self, requests=requests)

    @property
    def started_at(self) -> datetime | None:
        return min((r.started_at for r in self.requests.values() if r.started_at), default=None)

    @property
    def finished_at(self) -> datetime | None:
        if not self.terminal:
            return None
        return max((r.finished_at for r in self.requests.values() if r.finished_at), default=None)


@dataclass(slots=True)
class MonitorView:
    """Monitors whose tenant is signed with `secret` (the gateway's marker key), and the
    checks whose requests' markers are."""

    secret: bytes = b""
    monitors: dict[str, MonitorRecord] = field(default_factory=dict)
    checks: dict[str, Check] = field(default_factory=dict)
    _by_request: dict[str, str] = field(default_factory=dict)

    def monitor_record(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        if value is None:
            self.monitors.pop(key.decode(errors="replace"), None)
            return
        try:
            record = MonitorRecord.model_validate_json(value)
        except ValidationError:
            return
        if record_authentic(self.secret, record):
            self.monitors[record.id] = record
        else:  # a producer's record naming a tenant: no tenant's monitor
            self.monitors.pop(record.id, None)

    def request(self, request_id: str, metadata: dict[str, Any], at: datetime) -> None:
        """A request read from the requests topic: a check's when it carries a marker signed
        with the gateway's key (a producer's marker adds no check to any monitor)."""
        marker = authentic_marker(self.secret, request_id, metadata, METADATA_KEY)
        if marker is None:
            return
        check = self.checks.setdefault(
            marker.check_id,
            Check(
                id=marker.check_id,
                monitor_id=marker.monitor_id,
                trigger=marker.trigger,
                scheduled_for=marker.scheduled_for,
                created_at=at,
                tenant=marker.tenant,
            ),
        )
        if check.monitor_id != marker.monitor_id or request_id in check.requests:
            return  # another monitor's marker, or a redelivered copy
        check.requests[request_id] = CheckRequest(
            request_id=request_id, target_id=marker.target_id, results_offset=marker.results_offset
        )
        self._by_request[request_id] = check.id

    def tick_record(self, value: bytes | None) -> None:
        """A monitor's tick record: the ticks it skipped (signed by its owner) are checks."""
        if value is None:
            return
        try:
            tick = MonitorTick.model_validate_json(value)
        except ValidationError:
            return
        for skip in tick.skipped:
            if skip.check_id in self.checks or not skip_authentic(self.secret, skip):
                continue
            self.checks[skip.check_id] = Check(
                id=skip.check_id,
                monitor_id=skip.monitor_id,
                trigger="scheduled",
                scheduled_for=skip.scheduled_for,
                created_at=skip.at,
                tenant=skip.tenant,
                skipped=True,
            )

    def running_checks(self, tenant: str) -> int:
        """The tenant's checks still running (each counts as one of its jobs)."""
        return sum(1 for c in self.checks.values() if c.tenant == tenant and not c.terminal)

    def progressed(self, event: ProgressEvent) -> None:
        check_id = self._by_request.get(event.request_id)
        if check_id is None:
            return
        request = self.checks[check_id].requests[event.request_id]
        if event.type == EventType.ACCEPTED and request.state == "queued":
            request.state, request.started_at = "running", event.at
        elif event.is_terminal:
            request.state = "completed" if event.type == EventType.COMPLETED else "failed"
            request.finished_at = event.at
            request.started_at = request.started_at or event.at

    def of_tenant(self, tenant: str | None, *, open_gateway: bool) -> list[MonitorRecord]:
        return sorted(
            (m for m in self.monitors.values() if open_gateway or m.tenant == tenant),
            key=lambda m: (m.created_at, m.id),
        )

    def checks_of(self, monitor_id: str) -> list[Check]:
        """The monitor's checks, newest first."""
        found = [check for check in self.checks.values() if check.monitor_id == monitor_id]
        return sorted(found, key=lambda c: c.created_at, reverse=True)
