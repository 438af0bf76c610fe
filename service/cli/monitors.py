"""`crawlstream monitor create|list|pause|resume|run|delete|checks`: monitors for Kafka users,
written to and read from the monitors topic directly (no gateway)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from service.client import CrawlClient
from service.contracts import CrawlOptions, CrawlSpec, utc_now
from service.contracts_monitors import (
    METADATA_KEY,
    AdaptiveSpec,
    MonitorCheckMarker,
    MonitorRecord,
    MonitorTarget,
    ScheduleSpec,
)
from service.errors import ConfigurationError
from service.messaging.kafka_config import client_options
from service.messaging.metadata import partitions_of
from service.messaging.reader import PartitionSpan
from service.monitors.manual import run_by_hand
from service.monitors.schedule import Schedule, ScheduleError
from service.monitors.signing import authentic_marker, signed_record
from service.monitors.writer import MonitorWriter
from service.sealing.marker_auth import marker_secret

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from aiokafka.structs import ConsumerRecord

    from service.settings import Settings


async def run_monitor(args: argparse.Namespace, settings: Settings) -> int:
    command = args.monitor_command
    if command == "create":
        created = _created(args, settings)
        async with MonitorWriter(settings) as writer:
            await writer.put(created)
        _say(created.id)
        return 0
    monitors = await read_monitors(settings)
    if command == "list":
        _list(monitors, as_json=args.json)
        return 0
    found = monitors.get(args.monitor_id)
    if found is None:
        raise ConfigurationError(f"no monitor {args.monitor_id}")
    record = found
    if command in {"pause", "resume"}:
        await _set_status(settings, record, "paused" if command == "pause" else "active")
    elif command == "delete":
        async with MonitorWriter(settings) as writer:
            await writer.delete(record.id)
    elif command == "run":
        _say(await _run(settings, record))
    else:
        await _checks(settings, record)
    return 0


def _say(line: str) -> None:
    print(line, flush=True)  # noqa: T201


def _created(args: argparse.Namespace, settings: Settings) -> MonitorRecord:
    now = utc_now()
    spec = ScheduleSpec(cron=args.cron, text=args.every, timezone=args.timezone)
    try:
        Schedule.of(cron=spec.cron, text=spec.text, timezone=spec.timezone).check_interval(
            settings.monitor_min_interval.total_seconds(), now
        )
        crawl = (
            None if args.crawl is None else CrawlSpec(max_pages=args.crawl, max_depth=args.depth)
        )
        target = MonitorTarget(
            id="t0",
            type="scrape" if crawl is None else "crawl",
            urls=tuple(args.urls[:1] if crawl else args.urls),
            options=CrawlOptions(),
            crawl=crawl,
            adaptive=_adaptive(args.adaptive),
        )
    except (ScheduleError, ValidationError, ValueError) as exc:
        raise ConfigurationError(str(exc)) from None
    monitor_id = uuid.uuid4().hex
    record = MonitorRecord(
        id=monitor_id,
        name=args.name,
        tenant=args.tenant,
        schedule=spec,
        targets=(target,),
        tag=f"monitor:{monitor_id}",
        created_at=now,
        updated_at=now,
        schedule_since=now,
    )
    return signed_record(marker_secret(settings), record)


def _adaptive(given: str | None) -> AdaptiveSpec | None:
    if given is None:
        return None
    low, _, high = given.partition(",")
    return AdaptiveSpec(min_interval_s=int(low), max_interval_s=int(high or low))


async def _set_status(settings: Settings, record: MonitorRecord, status: str) -> None:
    now = utc_now()
    changes: dict[str, Any] = {"status": status, "updated_at": now}
    if status == "active" and record.status == "paused":
        changes["schedule_since"] = now
    changed = signed_record(marker_secret(settings), record.model_copy(update=changes))
    async with MonitorWriter(settings) as writer:
        await writer.put(changed)


async def _run(settings: Settings, record: MonitorRecord) -> str:
    async with CrawlClient(settings) as client:
        check, _ = await run_by_hand(client, record, settings)
    return check


def _list(monitors: dict[str, MonitorRecord], *, as_json: bool) -> None:
    for record in sorted(monitors.values(), key=lambda m: (m.created_at, m.id)):
        if as_json:
            _say(record.model_dump_json())
            continue
        when = record.schedule.cron or record.schedule.text
        _say(f"{record.id}  {record.status:<6}  {when} ({record.schedule.timezone})  {record.name}")


async def _checks(settings: Settings, record: MonitorRecord) -> None:
    """Each check request of the monitor on the requests topic, with its run's state."""
    async with CrawlClient(settings) as client:
        async for request_id, marker in _check_requests(settings, record.id):
            state = await client.status(request_id)
            when = marker.scheduled_for.isoformat() if marker.scheduled_for else "-"
            _say(f"{marker.check_id}  {marker.trigger:<9}  {when}  {request_id}  {state.line()}")


async def _check_requests(
    settings: Settings, monitor_id: str
) -> AsyncIterator[tuple[str, MonitorCheckMarker]]:
    secret = marker_secret(settings)
    async for record in _records(settings, settings.requests_topic):
        request_id = (record.key or b"").decode(errors="replace")
        try:
            metadata = json.loads(record.value or b"{}").get("metadata") or {}
            marker = authentic_marker(secret, request_id, metadata, METADATA_KEY)
        except (ValueError, AttributeError):
            continue
        if marker is not None and marker.monitor_id == monitor_id:
            yield request_id, marker


async def read_monitors(settings: Settings) -> dict[str, MonitorRecord]:
    """Every monitor on the monitors topic now (tombstones applied)."""
    found: dict[str, MonitorRecord] = {}
    async for record in _records(settings, settings.monitors_topic):
        key = (record.key or b"").decode(errors="replace")
        if record.value is None:
            found.pop(key, None)
            continue
        try:
            found[key] = MonitorRecord.model_validate_json(record.value)
        except ValidationError:
            continue
    return found


async def _records(settings: Settings, topic: str) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
    partitions = [TopicPartition(topic, p) for p in sorted(await partitions_of(settings, topic))]
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, enable_auto_commit=False)
    timeout_s = settings.kafka_timeout.total_seconds()
    await asyncio.wait_for(consumer.start(), timeout_s)
    try:
        span = await PartitionSpan.seek(consumer, partitions)
        async for record in span.records():
            yield record
    finally:
        await asyncio.wait_for(consumer.stop(), timeout_s)
