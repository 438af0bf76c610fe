"""What a progress record asks of the dispatcher: a delivery to a receiver, nothing, or a
skip. Every record that cannot be used is counted by reason, logged once and skipped here,
never raised. Pure: the dispatcher feeds it records and the results topic's partitions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import structlog
from pydantic import ValidationError

from service.contracts import ProgressEvent, utc_now
from service.contracts_monitors import METADATA_KEY
from service.contracts_webhook import WebhookConfig
from service.gateway.jobs import MARKER_KEY, JobMarker
from service.monitors.signing import authentic_marker, webhook_job
from service.sealing.targets import TargetError
from service.webhooks.metrics import SkipReason
from service.webhooks.monitor_events import monitor_hook
from service.webhooks.payloads import hook_of

if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from datetime import timedelta

    from service.contracts_monitors import MonitorCheckMarker
    from service.contracts_webhook import Hook
    from service.sealing.targets import Sealer, Target
    from service.webhooks.metrics import WebhookMetrics

log = structlog.get_logger(__name__)

MAX_OFFSET: Final = 2**63 - 1
"""Kafka offsets are signed 64-bit: a marker naming a larger one names no record."""


class Record(Protocol):
    @property
    def value(self) -> bytes | None: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """One event to hand to its receiver's lane (`hook` None: nothing to send, but the job's
    end still has to be seen in order)."""

    event: ProgressEvent
    hook: Hook | None
    target: Target
    marker: JobMarker | None
    check: MonitorCheckMarker | None = None
    """The monitor check the event's request is (its events are `monitor.*`)."""


class _Skip(Exception):  # noqa: N818 - a verdict, not a failure
    def __init__(self, reason: SkipReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class Records:
    """Classifies records: `plan` says what one asks for."""

    def __init__(
        self,
        *,
        sealer: Sealer,
        metrics: WebhookMetrics,
        max_age: timedelta,
        results_partitions: Callable[[], Collection[int]],
        expired: Callable[[ProgressEvent], None],
        marker_secret: bytes,
    ) -> None:
        self._sealer = sealer
        self._marker_secret = marker_secret
        """The gateway's marker key (`marker_auth.marker_secret`): only a marker it signed
        is a job's."""
        self._metrics = metrics
        self._max_age = max_age
        self._partitions = results_partitions
        self._expired = expired

    def plan(self, record: Record) -> Planned | None:
        """The delivery a record asks for, or None (nothing asked, expired, or skipped)."""
        try:
            return self._plan(record)
        except _Skip as skip:
            self._skipped(record, skip.reason, skip.detail)
        except Exception as exc:  # the record's error boundary: traceback, count, go on
            log.exception(
                "webhooks.record_failed", partition=record.partition, offset=record.offset
            )
            self._skipped(record, SkipReason.FAILED, repr(exc), logged=True)
        return None

    def _plan(self, record: Record) -> Planned | None:
        try:
            event = ProgressEvent.model_validate_json(record.value or b"")
        except ValidationError as exc:
            raise _Skip(SkipReason.INVALID, _first_error(exc)) from None
        try:
            hook = WebhookConfig.of(event.request_metadata)
        except ValidationError as exc:
            raise _Skip(SkipReason.INVALID_WEBHOOK, _first_error(exc)) from None
        if hook is None:
            return None
        marker = self._marker(event)
        check = self._check(event)
        job = event.request_id if check is None else webhook_job(check.monitor_id)
        try:
            target = self._sealer.open(job, hook)
        except TargetError as exc:
            raise _Skip(SkipReason.SEALED, str(exc)) from None
        if check is not None and target.tenant not in {None, check.tenant}:
            raise _Skip(SkipReason.SEALED, "the sealed webhook is another tenant's")
        if utc_now() - event.at > self._max_age:
            log.info("webhook.expired", request_id=event.request_id, type=event.type.value)
            self._metrics.events.labels("expired").inc()
            self._expired(event)
            return None
        asked = hook_of(event, target) if check is None else monitor_hook(event, target)
        return Planned(event=event, hook=asked, target=target, marker=marker, check=check)

    def _marker(self, event: ProgressEvent) -> JobMarker | None:
        if event.request_metadata.get(MARKER_KEY) is None:
            return None
        marker = JobMarker.authentic(self._marker_secret, event.request_id, event.request_metadata)
        if marker is None:
            raise _Skip(SkipReason.MARKER, "the job marker is not one the gateway signed")
        if not (
            marker.results_partition in self._partitions()
            and 0 <= marker.results_offset <= MAX_OFFSET
        ):
            raise _Skip(SkipReason.MARKER, "the job marker names no place in the results topic")
        return marker

    def _check(self, event: ProgressEvent) -> MonitorCheckMarker | None:
        """The monitor check the event's request is, when its marker is authentic."""
        if event.request_metadata.get(METADATA_KEY) is None:
            return None
        check = authentic_marker(
            self._marker_secret, event.request_id, event.request_metadata, METADATA_KEY
        )
        if check is None:
            raise _Skip(SkipReason.MARKER, "the monitor check marker is not signed")
        return check

    def _skipped(
        self, record: Record, reason: SkipReason, detail: str, *, logged: bool = False
    ) -> None:
        self._metrics.skipped.labels(reason).inc()
        if not logged:
            log.warning(
                "webhooks.skipped",
                reason=str(reason),
                detail=detail,
                partition=record.partition,
                offset=record.offset,
            )


def _first_error(exc: ValidationError) -> str:
    """The first validation error, without the input (it may carry a credential)."""
    error = exc.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]
