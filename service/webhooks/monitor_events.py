"""Webhook events of a monitor's check: `monitor.page` (one per page, with its status) and
`monitor.check.completed` (the summary), for check requests (`metadata.monitor`). Pure.

A check is one request per target; `monitor.check.completed` is sent once per check, when the
terminal event of one of its requests leaves none of them running, with the summary of all
their results (Firecrawl's shape: `data: [{checkId, monitorId, status, summary}]`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from service.contracts import EventType, ProgressEvent
from service.contracts_monitors import CheckPart, MonitorCheckMarker
from service.monitors.summary import page_status
from service.webhooks.payloads import WebhookEvent

if TYPE_CHECKING:
    from collections.abc import Mapping

    from service.contracts import PageResult
    from service.contracts_webhook import Hook
    from service.monitors.summary import Summary
    from service.webhooks.payloads import Hooked

CheckStatus = Literal["completed", "failed", "partial"]

_PAGE_EVENTS: Final = frozenset({EventType.PAGE_SUCCEEDED, EventType.PAGE_FAILED})


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


def parts_of(marker: MonitorCheckMarker, event: ProgressEvent) -> tuple[CheckPart, ...]:
    """Every request of the event's check (an older marker names none: its request is the
    check)."""
    if marker.parts:
        return marker.parts
    return (CheckPart(request_id=event.request_id, results_offset=marker.results_offset),)


def check_status(ends: Mapping[str, EventType | None]) -> CheckStatus | None:
    """The check's status once every request of it has ended (`ends`: per request, the
    type of its terminal event, None while it runs): `completed`, `failed` or `partial`;
    None while one runs."""
    if not ends or any(end is None for end in ends.values()):
        return None
    completed = {end == EventType.COMPLETED for end in ends.values()}
    if completed == {True}:
        return "completed"
    return "failed" if completed == {False} else "partial"


def check_event(
    marker: MonitorCheckMarker, status: CheckStatus, summary: Summary, config: Hooked
) -> WebhookEvent:
    """`monitor.check.completed`: the whole check's end and summary (one per check: its
    `eventId` is the check's)."""
    event_id = f"{marker.check_id}:completed"
    data = {
        "checkId": marker.check_id,
        "monitorId": marker.monitor_id,
        "status": status,
        "trigger": marker.trigger,
        "scheduledFor": None if marker.scheduled_for is None else marker.scheduled_for.isoformat(),
        "summary": summary.wire(),
    }
    body = _body(marker, "monitor.check.completed", event_id, config) | {
        "success": status == "completed" and summary.error == 0,
        "data": [data],
    }
    return WebhookEvent(id=event_id, hook="completed", body=body)
