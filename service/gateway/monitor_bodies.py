"""Firecrawl's monitor bodies (`POST`/`PATCH /v2/monitor`) as `MonitorRecord`s, and records,
checks and pages in Firecrawl's response shapes. Pure.

What has no counterpart here is refused with a 400 naming it: `search` targets, e-mail
notifications, `goal` and `judgeEnabled` (an LLM judge)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from service.contracts_monitors import MAX_TARGETS, MonitorRecord, MonitorTarget, ScheduleSpec
from service.gateway._fields import COMMON_KEYS, mapping_of, refuse_set, refuse_unknown
from service.gateway.errors import Detail, bad_request, refused
from service.gateway.mapping import batch_plan, crawl_plan
from service.monitors.schedule import Schedule, ScheduleError
from service.monitors.summary import page_status

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime, timedelta

    from service.contracts import PageResult
    from service.gateway.mapping import Limits
    from service.gateway.monitor_view import Check
    from service.monitors.summary import Summary

KEYS: Final = frozenset(
    {
        "name",
        "schedule",
        "targets",
        "webhook",
        "notification",
        "retentionDays",
        "goal",
        "judgeEnabled",
        "status",
    }
)
WEBHOOK_EVENTS: Final = ("monitor.page", "monitor.check.completed")


def schedule_of(raw: object, *, minimum: timedelta, now: datetime) -> ScheduleSpec:
    """The schedule of a body; a 400 naming `schedule` when unreadable or too fast."""
    body = mapping_of(raw, ("schedule",))
    refuse_unknown(body, frozenset({"cron", "text", "timezone"}), ("schedule",))
    try:
        spec = ScheduleSpec.model_validate(dict(body))
        schedule = Schedule.of(cron=spec.cron, text=spec.text, timezone=spec.timezone)
        schedule.check_interval(minimum.total_seconds(), now)
    except (ValidationError, ScheduleError) as exc:
        raise bad_request(Detail(path=("schedule",), message=str(exc))) from None
    return spec


def targets_of(raw: object, *, limits: Limits) -> tuple[MonitorTarget, ...]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_TARGETS:
        raise bad_request(Detail(path=("targets",), message=f"1 to {MAX_TARGETS} targets"))
    return tuple(_target(item, index, limits) for index, item in enumerate(raw))


def _target(raw: object, index: int, limits: Limits) -> MonitorTarget:
    path = ("targets", index)
    body = mapping_of(raw, path)
    kind = body.get("type")
    target_id = str(body.get("id") or f"t{index}")
    scrape = dict(mapping_of(body.get("scrapeOptions") or {}, (*path, "scrapeOptions")))
    if _tracking_only(scrape):
        del scrape["formats"]
    if kind == "scrape":
        refuse_unknown(body, frozenset({"id", "type", "urls", "url", "scrapeOptions"}), path)
        urls = body.get("urls") or ([body["url"]] if body.get("url") else [])
        plan = batch_plan({"urls": urls, **scrape}, limits=limits)
        return MonitorTarget(
            id=target_id, type="scrape", urls=plan.urls, options=plan.scrape.options
        )
    if kind == "crawl":
        refuse_unknown(
            body, frozenset({"id", "type", "url", "crawlOptions", "scrapeOptions"}), path
        )
        crawl = dict(mapping_of(body.get("crawlOptions") or {}, (*path, "crawlOptions")))
        plan_c = crawl_plan(
            {"url": body.get("url"), **crawl, "scrapeOptions": scrape}, limits=limits
        )
        return MonitorTarget(
            id=target_id,
            type="crawl",
            urls=(plan_c.url,),
            options=plan_c.scrape.options,
            crawl=plan_c.spec,
        )
    if kind == "search":
        raise refused((*path, "type"), "search targets are not supported on this cluster")
    raise bad_request(Detail(path=(*path, "type"), message="`scrape` or `crawl`"))


def _tracking_only(scrape: Mapping[str, Any]) -> bool:
    """Formats that name only `changeTracking` (checks always track): leave them out."""
    formats = scrape.get("formats")
    return isinstance(formats, list) and all(
        f == "changeTracking" or (isinstance(f, dict) and f.get("type") == "changeTracking")
        for f in formats
    )


def webhook_of(raw: object) -> dict[str, Any] | None:
    if raw is None:
        return None
    body = mapping_of(raw, ("webhook",))
    refuse_unknown(body, frozenset({"url", "headers", "metadata", "events"}), ("webhook",))
    if not isinstance(body.get("url"), str):
        raise bad_request(Detail(path=("webhook", "url"), message="a URL is required"))
    if body.get("headers"):
        raise refused(
            ("webhook", "headers"),
            "a monitor's webhook takes no headers here: they would be echoed on every event "
            "of its checks (sign-check the `X-Firecrawl-Signature` instead)",
        )
    events = body.get("events") or list(WEBHOOK_EVENTS)
    if not isinstance(events, list) or not set(events) <= set(WEBHOOK_EVENTS):
        raise bad_request(Detail(path=("webhook", "events"), message=", ".join(WEBHOOK_EVENTS)))
    return {
        "url": body["url"],
        "metadata": dict(body.get("metadata") or {}),
        "events": events,
    }


def refuse_unsupported(body: Mapping[str, Any]) -> None:
    refuse_unknown(body, KEYS | COMMON_KEYS, ())
    refuse_set(body, ("goal", "judgeEnabled"), ())
    notification = body.get("notification")
    if isinstance(notification, dict) and (notification.get("email") or {}).get("enabled"):
        raise refused(("notification", "email"), "e-mail notifications are not sent here")


def retention_of(body: Mapping[str, Any], default: int) -> int:
    value = body.get("retentionDays", default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 3650:  # noqa: PLR2004
        raise bad_request(Detail(path=("retentionDays",), message="1 to 3650 days"))
    return value


def monitor_json(
    record: MonitorRecord,
    *,
    next_run: datetime | None,
    last: Check | None,
    last_summary: Summary | None,
    webhook: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Firecrawl's `Monitor` (`webhook`: as shown to its owner, a sealed one opened)."""
    schedule = Schedule.of(
        cron=record.schedule.cron, text=record.schedule.text, timezone=record.schedule.timezone
    )
    return {
        "id": record.id,
        "name": record.name,
        "status": record.status,
        "schedule": {
            "cron": schedule.expression,
            "text": record.schedule.text,
            "timezone": record.schedule.timezone,
        },
        "nextRunAt": None if next_run is None else next_run.isoformat(),
        "lastRunAt": None if last is None else last.created_at.isoformat(),
        "currentCheckId": None if last is None or last.terminal else last.id,
        "targets": [_target_json(t) for t in record.targets],
        "webhook": None if webhook is None else dict(webhook),
        "notification": None,
        "retentionDays": record.retention_days,
        "lastCheckSummary": None if last_summary is None else last_summary.wire(),
        "createdAt": record.created_at.isoformat(),
        "updatedAt": record.updated_at.isoformat(),
    }


def _target_json(target: MonitorTarget) -> dict[str, Any]:
    if target.type == "crawl":
        return {"id": target.id, "type": "crawl", "url": target.urls[0]}
    return {"id": target.id, "type": "scrape", "urls": list(target.urls)}


def check_json(check: Check, summary: Summary, targets: Mapping[str, str]) -> dict[str, Any]:
    """Firecrawl's `MonitorCheck` (`targets`: target id -> type)."""
    updated = check.finished_at or check.started_at or check.created_at
    return {
        "id": check.id,
        "monitorId": check.monitor_id,
        "status": check.state,
        "trigger": check.trigger,
        "scheduledFor": None if check.scheduled_for is None else check.scheduled_for.isoformat(),
        "startedAt": None if check.started_at is None else check.started_at.isoformat(),
        "finishedAt": None if check.finished_at is None else check.finished_at.isoformat(),
        "billingStatus": "not_applicable",
        "summary": summary.wire(),
        "targetResults": [
            {
                "targetId": r.target_id,
                "type": targets.get(r.target_id, "scrape"),
                "expectedJobs": [r.request_id],
            }
            for r in check.requests.values()
        ],
        "error": None,
        "createdAt": check.created_at.isoformat(),
        "updatedAt": updated.isoformat(),
    }


def page_json(result: PageResult, target_id: str) -> dict[str, Any]:
    """Firecrawl's `MonitorCheckPage`."""
    change = result.change_tracking
    page: dict[str, Any] = {
        "id": result.result_id,
        "targetId": target_id,
        "url": result.url,
        "status": page_status(result),
        "statusCode": result.status_code,
        "error": None if result.error is None else result.error.message,
        "metadata": {"title": result.title} if result.title else None,
        "createdAt": result.fetched_at.isoformat(),
    }
    if change is not None and change.diff is not None:
        page["diff"] = {"text": change.diff}
    return page
