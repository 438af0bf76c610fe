"""Which tick a monitor fires now, the ids of its check, and what a new owner of a monitor
does with a tick its predecessor may have left half fired. Pure.

A tick fires exactly once across the cluster because everything about it is derived from the
monitor and the tick's scheduled time: the check id (uuid5), the request id of each target,
the requests partition each goes to. The owner first records its intent (the tick and, per
request, the requests partition's end before it produces), then produces the requests, then
records the tick as produced. An owner that finds an intent not marked produced looks for
each request in its partition from that recorded end and produces only those missing: a
crash anywhere in between leaves at most the same requests, never two of one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from service.contracts_monitors import PlannedRequest
    from service.monitors.schedule import Schedule

CHECK_NAMESPACE: Final = uuid.UUID("6f1d3c2a-5b7e-4f0a-9c1d-2e8b7a6c5d40")
"""The uuid5 namespace of check ids."""


def check_id(monitor_id: str, scheduled_for: datetime) -> str:
    """The id of the scheduled check of `monitor_id` at `scheduled_for`: the same on every
    coordinator, so a tick fired again after a takeover names the same check."""
    return str(uuid.uuid5(CHECK_NAMESPACE, f"{monitor_id}@{scheduled_for.isoformat()}"))


def manual_check_id(monitor_id: str, nonce: str) -> str:
    """The id of a check run by hand (`run_monitor`): one per call."""
    return str(uuid.uuid5(CHECK_NAMESPACE, f"{monitor_id}!manual!{nonce}"))


def request_id_of(check: str, target_index: int) -> str:
    """The request id of a check's target (one request per target)."""
    return f"{check}.{target_index}"


def check_of(request_id: str) -> tuple[str, int] | None:
    """The check id and target index of a check's request id, or None."""
    check, dot, index = request_id.rpartition(".")
    if not dot or not index.isdigit():
        return None
    return check, int(index)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fire:
    """Fire the tick `scheduled_for` now."""

    scheduled_for: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    """Nothing due; the next tick is `until`."""

    until: datetime


def decide(
    schedule: Schedule,
    *,
    since: datetime,
    last_fired: datetime | None,
    now: datetime,
    paused: bool,
) -> Fire | Wait | None:
    """What the owner of a monitor does now. `since`: when its schedule last took effect
    (created, rescheduled or resumed): no tick before it fires. Of several ticks missed
    (nobody owned the monitor, or its owner was down), only the latest fires, once. None:
    paused."""
    if paused:
        return None
    anchor = since if last_fired is None else max(since, last_fired)
    following = schedule.next_after(anchor)
    if following > now:
        return Wait(until=following)
    due = schedule.latest_due(anchor, now)
    return Fire(scheduled_for=due) if due is not None else Wait(until=following)


def missing(planned: Sequence[PlannedRequest], found: set[str]) -> tuple[PlannedRequest, ...]:
    """The requests of a half-fired tick that its partitions do not hold (`found`: the
    request ids read from each `offset_before` to the partition's end)."""
    return tuple(p for p in planned if p.request_id not in found)
