"""The requests of a check: one `CrawlRequest` per target, with change tracking under the
monitor's tag and a `metadata.monitor` marker naming the monitor, the check and the target.
Pure: the coordinator (scheduled ticks) and the gateway (`run_monitor`) both build them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from service.contracts import ChangeTracking, CrawlRequest
from service.contracts_monitors import (
    METADATA_KEY,
    CheckPart,
    MonitorCheckMarker,
    MonitorRecord,
)
from service.contracts_webhook import WEBHOOK_KEY
from service.monitors.signing import signed_marker
from service.monitors.ticks import request_id_of

MONITOR_HOOKS: Final = {"monitor.page": "page", "monitor.check.completed": "completed"}
"""Firecrawl's monitor webhook events -> the request hooks that carry them (the webhook
dispatcher sends them as `monitor.*` for a check's request)."""

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping
    from datetime import datetime
    from typing import Literal

    from pydantic import JsonValue


def check_requests(
    monitor: MonitorRecord,
    check: str,
    *,
    trigger: Literal["scheduled", "manual"],
    scheduled_for: datetime | None,
    results_offsets: Mapping[str, int] | None = None,
    progress_offsets: Mapping[str, int] | None = None,
    only: Collection[str] | None = None,
    secret: bytes,
) -> list[CrawlRequest]:
    """The requests of check `check` of `monitor`, in target order, each page fetched
    afresh (`max_age_ms` 0: a check looks at the page, never at the cache) (`results_offsets`,
    `progress_offsets`: per request id, where its results and progress partitions end
    before it is produced; `only`: the target ids checked, when not all: a request keeps its
    target's index in its id). Each request's marker names every request of the check and
    is signed with `secret` (the gateway's marker key: `monitors/signing.py`)."""
    included = [
        (index, target)
        for index, target in enumerate(monitor.targets)
        if only is None or target.id in only
    ]
    parts = tuple(
        CheckPart(
            request_id=request_id_of(check, index),
            results_offset=(results_offsets or {}).get(request_id_of(check, index), 0),
            progress_offset=(progress_offsets or {}).get(request_id_of(check, index), 0),
        )
        for index, _ in included
    )
    requests = []
    for index, target in included:
        ignore = target.options.change_tracking.ignore if target.options.change_tracking else ()
        tracking = ChangeTracking(tag=monitor.tag, diff=True, ignore=ignore)
        marker = MonitorCheckMarker(
            monitor_id=monitor.id,
            check_id=check,
            target_id=target.id,
            trigger=trigger,
            scheduled_for=scheduled_for,
            tenant=monitor.tenant,
            results_offset=(results_offsets or {}).get(request_id_of(check, index), 0),
            parts=parts,
        )
        request_id = request_id_of(check, index)
        metadata: dict[str, JsonValue] = {METADATA_KEY: signed_marker(secret, request_id, marker)}
        if monitor.tenant is not None:
            metadata["tenant"] = monitor.tenant
        if monitor.webhook is not None:
            metadata[WEBHOOK_KEY] = _hooked(monitor.webhook)
        requests.append(
            CrawlRequest(
                request_id=request_id_of(check, index),
                urls=list(target.urls[:1] if target.type == "crawl" else target.urls),
                options=target.options.model_copy(
                    update={"change_tracking": tracking, "max_age_ms": 0, "cache_only": False}
                ),
                crawl=target.crawl if target.type == "crawl" else None,
                metadata=metadata,
            )
        )
    return requests


def _hooked(webhook: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The monitor's webhook as a request's `metadata.webhook` (its events as hooks); one
    the gateway sealed already names hooks, and goes as it is."""
    if "sealed" in webhook:
        return webhook
    events = webhook.get("events")
    named = events if isinstance(events, list) else list(MONITOR_HOOKS)
    hooks: list[JsonValue] = [
        MONITOR_HOOKS[e] for e in named if isinstance(e, str) and e in MONITOR_HOOKS
    ]
    return {"url": webhook.get("url"), "metadata": webhook.get("metadata") or {}, "events": hooks}
