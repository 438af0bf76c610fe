"""Webhook events of a monitor's check: `monitor.page` (one per page, with its status) and
`monitor.check.completed` (the summary), for check requests (`metadata.monitor`). Pure.

A check is one request per target; `monitor.check.completed` is sent when a target's request
ends, with that request's summary (a one-target monitor: the check's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from service.contracts import EventType, ProgressEvent
from service.contracts_monitors import METADATA_KEY, MonitorCheckMarker
from service.monitors.summary import page_status
from service.webhooks.payloads import WebhookEvent

if TYPE_CHECKING:
    from service.contracts import PageResult
    from service.contracts_webhook import Hook
    from service.monitors.summary import Summary
    from service.webhooks.payloads import Hooked

_PAGE_EVENTS: Final = frozenset({EventType.PAGE_SUCCEEDED, EventType.PAGE_FAILED})


def marker_of(event: ProgressEvent) -> MonitorCheckMarker | None:
    """The check a request's event belongs to, or None (not a check, or unreadable)."""
    raw = event.request_metadata.get(METADATA_KEY)
    if not isinstance(raw, dict):
        return None
    try:
        return MonitorCheckMarker.model_validate(raw)
    except ValidationError:
        return None


def monitor_hook(event: ProgressEvent, config: Hooked) -> Hook | None:
    """Every page (failed ones too: they are `error` pages of the check) and the end."""
    if event.type in _PAGE_EVENTS and "page" in config.events:
        return "page"
    if event.is_terminal and "completed" in config.events:
        return "completed"
    return None


def _body(marker: MonitorCheckMarker, kind: str, event_id: str, config: Hooked) -> dict[str, Any]:
    return {
        "success": True,
        "type": kind,
        "id": marker.check_id,
        "monitorId": marker.monitor_id,
        "checkId": marker.check_id,
        "eventId": event_id,
        "metadata": dict(config.metadata),
    }


def page_event(
    event: ProgressEvent, marker: MonitorCheckMarker, result: PageResult | None, config: Hooked
) -> WebhookEvent:
    """`monitor.page`: the page's status (`error` when its result could not be read)."""
    event_id = f"{event.request_id}:{event.result_id}"
    page: dict[str, Any] = {"targetId": marker.target_id, "status": "error", "url": None}
    if result is not None:
        page |= {
            "url": result.url,
            "status": page_status(result),
            "statusCode": result.status_code,
            "error": None if result.error is None else result.error.message,
        }
        change = result.change_tracking
        if change is not None and change.diff is not None:
            page["diff"] = {"text": change.diff}
    body = _body(marker, "monitor.page", event_id, config) | {"data": [page]}
    return WebhookEvent(id=event_id, hook="page", body=body)


def check_event(
    event: ProgressEvent, marker: MonitorCheckMarker, summary: Summary, config: Hooked
) -> WebhookEvent:
    """`monitor.check.completed`: the target request's end and its summary."""
    event_id = f"{event.request_id}:completed"
    data = {
        "status": "completed" if event.type == EventType.COMPLETED else "failed",
        "targetId": marker.target_id,
        "trigger": marker.trigger,
        "scheduledFor": None if marker.scheduled_for is None else marker.scheduled_for.isoformat(),
        "summary": summary.wire(),
    }
    body = _body(marker, "monitor.check.completed", event_id, config) | {"data": data}
    return WebhookEvent(id=event_id, hook="completed", body=body)
