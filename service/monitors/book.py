"""What a coordinator knows of the monitors of the partitions it owns: their records and their
last fired ticks, folded from the two compacted topics. Pure (the scheduler feeds it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import structlog
from pydantic import ValidationError

from service.contracts_monitors import MonitorRecord, MonitorTick
from service.monitors.schedule import Schedule, ScheduleError
from service.monitors.signing import record_authentic

if TYPE_CHECKING:
    from datetime import timedelta

log = structlog.get_logger(__name__)

UNSIGNED: Final = (
    "the record names a tenant but is not signed with the gateway's key: written by a "
    "producer, or this worker's CRAWL_GATEWAY_SECRET (or keys file) is not the gateway's"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Known:
    """A monitor that can be scheduled, and the partition it lives on."""

    record: MonitorRecord
    schedule: Schedule
    partition: int


@dataclass(slots=True)
class MonitorBook:
    """Monitors and ticks by monitor id; a record that cannot be used is logged and left out
    (its monitor does not fire) without stopping the others."""

    min_interval: timedelta
    secret: bytes
    """The gateway's marker key: a record naming a tenant must be signed with it."""
    monitors: dict[str, Known] = field(default_factory=dict)
    ticks: dict[str, MonitorTick] = field(default_factory=dict)
    recorded: dict[str, int] = field(default_factory=dict)
    """Every monitor id with a record (usable or not), and its partition."""
    tick_partitions: dict[str, int] = field(default_factory=dict)

    def monitor_record(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        monitor_id = key.decode(errors="replace")
        if value is None:
            self.monitors.pop(monitor_id, None)  # a tombstone: deleted
            self.recorded.pop(monitor_id, None)
            return
        self.recorded[monitor_id] = partition
        try:
            record = MonitorRecord.model_validate_json(value)
            schedule = Schedule.of(
                cron=record.schedule.cron,
                text=record.schedule.text,
                timezone=record.schedule.timezone,
            )
            schedule.check_interval(self.min_interval.total_seconds(), record.created_at)
        except (ValidationError, ScheduleError, ValueError) as exc:
            self._unusable(monitor_id, str(exc))
            return
        if not record_authentic(self.secret, record):
            self._unusable(monitor_id, UNSIGNED)
            return
        self.monitors[monitor_id] = Known(record=record, schedule=schedule, partition=partition)

    def _unusable(self, monitor_id: str, error: str) -> None:
        log.warning("monitor.unusable", monitor_id=monitor_id, error=error[:500])
        self.monitors.pop(monitor_id, None)

    def tick_record(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        if value is None:  # a deleted monitor's tick
            self.ticks.pop(key.decode(errors="replace"), None)
            self.tick_partitions.pop(key.decode(errors="replace"), None)
            return
        try:
            tick = MonitorTick.model_validate_json(value)
        except ValidationError:
            log.warning("monitor.tick_unusable", monitor_id=key.decode(errors="replace"))
            return
        current = self.ticks.get(tick.monitor_id)
        if current is None or (tick.scheduled_for, tick.produced) >= (
            current.scheduled_for,
            current.produced,
        ):
            self.ticks[tick.monitor_id] = tick
            self.tick_partitions[tick.monitor_id] = partition

    def orphans(self, partition: int) -> list[str]:
        """Monitor ids of the tick records on `partition` whose monitor has no record (it
        was deleted): each is to be tombstoned (asked once the partition is read to its
        end, so a record not read yet is no orphan)."""
        return [
            monitor_id
            for monitor_id, at in self.tick_partitions.items()
            if at == partition and monitor_id not in self.recorded
        ]

    def tick_deleted(self, monitor_id: str) -> None:
        self.ticks.pop(monitor_id, None)
        self.tick_partitions.pop(monitor_id, None)

    def forget(self, partitions: set[int]) -> None:
        """Drop what lives on partitions no longer owned."""
        for monitor_id, known in list(self.monitors.items()):
            if known.partition in partitions:
                del self.monitors[monitor_id]
        for monitor_id, partition in list(self.recorded.items()):
            if partition in partitions:
                del self.recorded[monitor_id]
        for monitor_id, partition in list(self.tick_partitions.items()):
            if partition in partitions:
                self.tick_deleted(monitor_id)

    def on(self, partition: int) -> list[Known]:
        return [known for known in self.monitors.values() if known.partition == partition]
