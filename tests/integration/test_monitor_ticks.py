"""Monitors' ticks against a real broker and coordinator workers: each scheduled tick fires
exactly once across the cluster, also when the coordinator owning the monitor is SIGKILLed
between ticks, and a tick its owner left half fired (intent recorded, request produced or
not) is completed by the next owner without a second request."""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from harness import send, wait_for_leaders

from service.contracts import dump_request, utc_now
from service.contracts_monitors import (
    AdaptiveSpec,
    MonitorRecord,
    MonitorTarget,
    MonitorTick,
    PlannedRequest,
    ScheduleSpec,
)
from service.messaging.topics import ensure_topics, partition_for
from service.monitors import Schedule, check_id, check_requests
from service.sealing.marker_auth import marker_secret

if TYPE_CHECKING:
    from harness import Topics
    from testsite import TestSite

pytestmark = pytest.mark.integration

FAST = {"CRAWL_ROLE": "coordinator", "CRAWL_MONITOR_MIN_INTERVAL": "1"}
"""Coordinators only (no browser: a check's pages wait, which these tests do not need), and
a minimum interval lowered to 1 s so that `every 4 seconds` is allowed: only these tests
schedule faster than the default 60 s, to see several ticks in a short test."""

STATIC = {"CRAWL_STATIC_MEMBERSHIP": "true", "CRAWL_WORKER_NAME": "monitors"}
"""A restarted static member takes its partitions back at once (no session-timeout wait)."""

INTERVAL_S = 4

ADAPTIVE_MIN_S = 8

PARTITIONS = 4
"""The harness's partition count of every topic."""


def monitor(
    monitor_id: str, site: TestSite, schedule: ScheduleSpec, *, adaptive: bool = False
) -> MonitorRecord:
    now = utc_now()
    targets = [MonitorTarget(id="t0", type="scrape", urls=(site.url("/page/1"),))]
    if adaptive:
        spec = AdaptiveSpec(min_interval_s=ADAPTIVE_MIN_S, max_interval_s=60)
        targets.append(
            MonitorTarget(id="t1", type="scrape", urls=(site.url("/page/2"),), adaptive=spec)
        )
    return MonitorRecord(
        id=monitor_id,
        name=monitor_id,
        schedule=schedule,
        targets=tuple(targets),
        tag=f"monitor:{monitor_id}",
        created_at=now,
        updated_at=now,
        schedule_since=now,
    )


async def read_all(topics: Topics, topic: str) -> list[Any]:
    """Every record of `topic` up to its end now."""
    consumer = AIOKafkaConsumer(bootstrap_servers=topics.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        records: list[Any] = []
        async with asyncio.timeout(30):
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                batch = await consumer.getmany(timeout_ms=200)
                for found in batch.values():
                    records.extend(found)
        return records
    finally:
        await consumer.stop()


def fired(worker: Any) -> list[dict[str, Any]]:
    return [e for e in worker.events() if e.get("event") == "monitor.fired"]


async def wait_fired(worker: Any, count: int, deadline_s: float) -> list[dict[str, Any]]:
    async with asyncio.timeout(deadline_s):
        while len(fired(worker)) < count:
            await asyncio.sleep(0.2)
    return fired(worker)


def checks_on(requests: list[Any]) -> dict[str, list[datetime]]:
    """request id -> scheduled times of every check request record with that id."""
    found: dict[str, list[datetime]] = {}
    for record in requests:
        marker = json.loads(record.value).get("metadata", {}).get("monitor")
        if marker is not None:
            at = datetime.fromisoformat(marker["scheduled_for"])
            found.setdefault(record.key.decode(), []).append(at)
    return found


@pytest.mark.long_running
async def test_each_tick_fires_once_while_the_owner_is_killed_between_ticks(
    topics: Topics, site: TestSite, start_worker
):
    """`every 4 seconds` (CRAWL_MONITOR_MIN_INTERVAL lowered to 1 s for this test only):
    two ticks fire, the only coordinator is SIGKILLed right after one, a new one takes the
    partitions back (static membership) and fires two more (a fetcher ends each check).
    Every check request on the requests topic is there once, their scheduled times are
    distinct and consecutive ticks, except those due while nobody owned the monitor, of
    which only the latest fired on takeover, and those recorded as `skipped_overlap` (the
    check the kill interrupted still ran), which produced no request."""
    await start_worker("fetcher", CRAWL_ROLE="fetcher")
    first = await start_worker("monitors-a", **FAST, **STATIC)
    await wait_for_leaders(topics)
    record = monitor(
        "m-kill", site, ScheduleSpec(text=f"every {INTERVAL_S} seconds"), adaptive=True
    )
    await send(topics, [(topics.monitors, record.id, record.model_dump_json().encode())])
    await wait_fired(first, 2, deadline_s=60)
    await first.kill()  # right after a tick: between ticks
    killed_at = utc_now()
    second = await start_worker("monitors-b", **FAST, **STATIC)
    taken_at = utc_now()
    await wait_fired(second, 2, deadline_s=60)
    await second.kill()

    requests = checks_on(await read_all(topics, topics.requests))
    overlapped = {
        skip.scheduled_for
        for r in await read_all(topics, topics.monitor_ticks)
        for skip in MonitorTick.model_validate_json(r.value).skipped
    }
    assert requests, "no check request was produced"
    assert all(len(times) == 1 for times in requests.values()), requests
    ticks = sorted(times[0] for rid, times in requests.items() if rid.endswith(".0"))
    assert len(set(ticks)) == len(ticks)
    schedule = Schedule.of(cron=None, text=f"every {INTERVAL_S} seconds")
    for earlier, later in itertools.pairwise(ticks):
        skipped = []
        tick = schedule.next_after(earlier)
        while tick < later:
            skipped.append(tick)
            tick = schedule.next_after(tick)
        assert tick == later
        # a tick not fired was due while nobody owned the monitor (or its owner started)
        for missing in skipped:
            assert missing in overlapped or (
                killed_at - timedelta(seconds=1)
                <= missing
                <= taken_at + timedelta(seconds=INTERVAL_S)
            ), (missing, killed_at, taken_at, ticks, overlapped)
    assert not overlapped & set(ticks)  # a tick is fired or skipped, never both
    for request_id, [at] in requests.items():
        assert request_id in {f"{check_id(record.id, at)}.0", f"{check_id(record.id, at)}.1"}
    # the adaptive target (8 s at least) is in the first check, then only once its
    # interval (adapted to what its previous check found) has passed
    adaptive = sorted(times[0] for rid, times in requests.items() if rid.endswith(".1"))
    assert adaptive[0] == ticks[0]
    assert len(adaptive) < len(ticks)
    assert all(b - a >= timedelta(seconds=ADAPTIVE_MIN_S) for a, b in itertools.pairwise(adaptive))


async def test_a_half_fired_tick_is_finished_without_a_second_request(
    topics: Topics, site: TestSite, start_worker
):
    """Two monitors whose previous owner died after recording a tick's intent: one after
    producing the check's request, one before. The next owner produces the missing request
    only: each request id is on the requests topic once, and both ticks end `produced`."""
    await ensure_topics(topics.settings())
    await wait_for_leaders(topics)
    weekly = ScheduleSpec(text="weekly")
    tick_at = datetime(2026, 11, 29, tzinfo=UTC)
    messages: list[tuple[str, str, bytes | None]] = []
    planned: dict[str, str] = {}
    secret = marker_secret(topics.settings())
    for name, produced_before in (("m-done", True), ("m-lost", False)):
        record = monitor(name, site, weekly)
        check = check_id(name, tick_at)
        [request] = check_requests(
            record, check, trigger="scheduled", scheduled_for=tick_at, secret=secret
        )
        partition = partition_for(request.request_id, PARTITIONS)
        intent = MonitorTick(
            monitor_id=name,
            scheduled_for=tick_at,
            check_id=check,
            requests=(
                PlannedRequest(request_id=request.request_id, partition=partition, offset_before=0),
            ),
            fired_at=utc_now(),
        )
        if produced_before:
            messages.append((topics.requests, request.request_id, dump_request(request)))
        messages.append((topics.monitors, name, record.model_dump_json().encode()))
        messages.append((topics.monitor_ticks, name, intent.model_dump_json().encode()))
        planned[name] = request.request_id
    await send(topics, messages)
    worker = await start_worker("monitors-half", **FAST)
    await wait_fired(worker, 2, deadline_s=60)

    requests = checks_on(await read_all(topics, topics.requests))
    assert set(requests) == set(planned.values())
    assert all(times == [tick_at] for times in requests.values()), requests
    resumed = {entry["monitor_id"]: entry["resumed"] for entry in fired(worker)}
    assert resumed == {"m-done": 1, "m-lost": 0}
    ticks = [
        MonitorTick.model_validate_json(r.value)
        for r in await read_all(topics, topics.monitor_ticks)
    ]
    assert {t.monitor_id for t in ticks if t.produced} == {"m-done", "m-lost"}


async def last_ticks(topics: Topics) -> dict[str, bytes | None]:
    """Per monitor id, the value of its last record on the ticks topic (None: a tombstone)."""
    return {r.key.decode(): r.value for r in await read_all(topics, topics.monitor_ticks)}


async def test_a_deleted_monitors_tick_record_is_tombstoned(
    topics: Topics, site: TestSite, start_worker
):
    """A monitor deleted while its owner runs, and one deleted while no coordinator ran
    (its tick record left behind): the last record of each on the compacted ticks topic is
    a tombstone, so compaction drops them; a monitor still there keeps its tick."""
    await ensure_topics(topics.settings())
    await wait_for_leaders(topics)
    tick_at = datetime(2026, 11, 29, tzinfo=UTC)
    gone = monitor("m-gone", site, ScheduleSpec(text="weekly"))
    left = MonitorTick(
        monitor_id=gone.id,
        scheduled_for=tick_at,
        check_id=check_id(gone.id, tick_at),
        requests=(),
        produced=True,
        fired_at=utc_now(),
    )
    await send(
        topics,
        [
            (topics.monitors, gone.id, gone.model_dump_json().encode()),
            (topics.monitor_ticks, gone.id, left.model_dump_json().encode()),
            (topics.monitors, gone.id, None),
        ],
    )
    worker = await start_worker("monitors-delete", **FAST)
    live = monitor("m-live", site, ScheduleSpec(text=f"every {INTERVAL_S} seconds"))
    kept = monitor("m-kept", site, ScheduleSpec(text=f"every {INTERVAL_S} seconds"))
    await send(
        topics,
        [
            (topics.monitors, live.id, live.model_dump_json().encode()),
            (topics.monitors, kept.id, kept.model_dump_json().encode()),
        ],
    )
    await wait_fired(worker, 2, deadline_s=60)
    assert (await last_ticks(topics)).get(live.id) is not None
    await send(topics, [(topics.monitors, live.id, None)])

    async def tombstoned() -> bool:
        last = await last_ticks(topics)
        return last.get(live.id, b"") is None and last.get(gone.id, b"") is None

    async with asyncio.timeout(60):
        while not await tombstoned():
            await asyncio.sleep(0.5)
    assert (await last_ticks(topics))[kept.id] is not None
