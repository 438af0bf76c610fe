"""Monitor schedules, ticks, the tick protocol's decisions, adaptive intervals and a check's
summary: pure logic, no broker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.contracts import ChangeStatus, CrawlOptions, PageChange, PageResult
from service.contracts_monitors import (
    MonitorRecord,
    MonitorTarget,
    MonitorTick,
    PlannedRequest,
    ScheduleSpec,
)
from service.monitors import (
    Adaptive,
    Fire,
    MonitorBook,
    Schedule,
    ScheduleError,
    Wait,
    check_id,
    check_of,
    check_requests,
    decide,
    summarise,
)
from service.monitors.adaptive import plan_targets
from service.monitors.signing import signed_record
from service.monitors.ticks import missing

KEY = b"gateway-marker-key"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def cron(expression: str, zone: str = "UTC") -> Schedule:
    return Schedule.of(cron=expression, text=None, timezone=zone)


def text(form: str, zone: str = "UTC") -> Schedule:
    return Schedule.of(cron=None, text=form, timezone=zone)


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        ("every 5 minutes", "*/5 * * * *"),
        ("Every minute", "* * * * *"),
        ("hourly", "0 * * * *"),
        ("every 6 hours", "0 */6 * * *"),
        ("daily at 9:00", "0 9 * * *"),
        ("every day at 17:30", "30 17 * * *"),
        ("every monday at 8:15", "15 8 * * 1"),
        ("weekly", "0 0 * * 0"),
    ],
)
def test_text_forms_become_cron(form: str, expected: str) -> None:
    """Firecrawl's text forms are read as the cron they normalise to."""
    assert text(form).expression == expected


@pytest.mark.parametrize(
    "form",
    ["every 7 minutes", "sometimes", "daily at 25:00", "every 0 hours", "every funday at 9:00"],
)
def test_unreadable_text_forms_are_refused(form: str) -> None:
    """A text form that is not one of the known ones, or not even, is a clear error."""
    with pytest.raises(ScheduleError):
        text(form)


@pytest.mark.parametrize(
    "expression",
    ["* * * *", "61 * * * *", "*/0 * * * *", "5-1 * * * *", "a * * * *", "1,,2 * * * *"],
)
def test_bad_cron_is_refused(expression: str) -> None:
    with pytest.raises(ScheduleError):
        cron(expression)


def test_unknown_time_zone_and_both_forms_are_refused() -> None:
    with pytest.raises(ScheduleError, match="time zone"):
        Schedule.of(cron="* * * * *", text=None, timezone="Mars/Olympus")
    with pytest.raises(ScheduleError, match="exactly one"):
        Schedule.of(cron="* * * * *", text="hourly")


def test_next_tick_of_cron_forms() -> None:
    """Steps, ranges, lists, names and the day-of-month/day-of-week OR rule."""
    assert cron("*/15 * * * *").next_after(at("2026-12-03T10:07:30")) == at("2026-12-03T10:15")
    assert cron("0 9-17/4 * * *").next_after(at("2026-12-03T13:00")) == at("2026-12-03T17:00")
    assert cron("0 0 1 jan *").next_after(at("2026-12-03T00:00")) == at("2027-01-01T00:00")
    # 3 December 2026 is a Thursday: "the 10th or any Monday" is Monday the 7th
    assert cron("0 0 10 * mon").next_after(at("2026-12-03T00:00")) == at("2026-12-07T00:00")
    assert cron("0 0 * * 7").next_after(at("2026-12-03T00:00")) == at("2026-12-06T00:00")


def test_next_tick_follows_the_time_zone_and_its_clock_changes() -> None:
    """`daily at 9:00` in Berlin is 08:00 UTC in winter and 07:00 UTC in summer."""
    berlin = text("daily at 9:00", "Europe/Berlin")
    assert berlin.next_after(at("2026-12-03T08:30")) == at("2026-12-04T08:00")
    assert berlin.next_after(at("2026-07-01T06:00")) == at("2026-07-01T07:00")
    # the night clocks go back (25 October 2026), a 02:30 tick fires once
    night = cron("30 2 * * *", "Europe/Berlin")
    first = night.next_after(at("2026-10-24T23:00"))
    assert night.next_after(first) - first >= timedelta(hours=23)


def test_seconds_interval_ticks_on_epoch_multiples() -> None:
    every = text("every 5 seconds")
    assert every.expression is None
    assert every.next_after(at("2026-12-03T10:00:02")) == at("2026-12-03T10:00:05")
    assert every.next_after(at("2026-12-03T10:00:05")) == at("2026-12-03T10:00:10")


def test_a_schedule_faster_than_the_minimum_interval_is_refused() -> None:
    """CRAWL_MONITOR_MIN_INTERVAL: 60 s admits every cron; 300 s refuses `*/1`; seconds
    intervals need a lowered minimum."""
    reference = at("2026-12-03T00:00")
    cron("* * * * *").check_interval(60, reference)
    text("every 5 minutes").check_interval(300, reference)
    with pytest.raises(ScheduleError, match="CRAWL_MONITOR_MIN_INTERVAL"):
        cron("0,1 * * * *").check_interval(300, reference)
    with pytest.raises(ScheduleError, match="every 5 s"):
        text("every 5 seconds").check_interval(60, reference)
    text("every 5 seconds").check_interval(1, reference)


def test_decide_fires_the_latest_missed_tick_once() -> None:
    """Ticks missed while nobody owned the monitor: only the latest fires; after it is
    recorded, nothing until the next tick; a paused monitor fires nothing."""
    every = text("every 5 minutes")
    since = at("2026-12-03T10:01")
    now = at("2026-12-03T10:27")
    assert decide(every, since=since, last_fired=None, now=now, paused=False) == Fire(
        scheduled_for=at("2026-12-03T10:25")
    )
    assert decide(every, since=since, last_fired=at("2026-12-03T10:25"), now=now, paused=False) == (
        Wait(until=at("2026-12-03T10:30"))
    )
    assert decide(every, since=since, last_fired=None, now=now, paused=True) is None
    # nothing before the schedule took effect (created or resumed at `since`)
    assert decide(
        every,
        since=at("2026-12-03T10:26"),
        last_fired=at("2026-12-03T09:00"),
        now=now,
        paused=False,
    ) == Wait(until=at("2026-12-03T10:30"))


def test_decide_finds_a_tick_missed_long_ago() -> None:
    """A monthly monitor whose owner was away for months fires its latest tick."""
    monthly = cron("0 0 1 * *")
    verdict = decide(
        monthly,
        since=at("2026-01-15T00:00"),
        last_fired=None,
        now=at("2026-06-20T00:00"),
        paused=False,
    )
    assert verdict == Fire(scheduled_for=at("2026-06-01T00:00"))


def test_check_ids_are_deterministic_per_monitor_and_tick() -> None:
    tick = at("2026-12-03T10:25")
    assert check_id("m1", tick) == check_id("m1", tick)
    assert check_id("m1", tick) != check_id("m1", tick + timedelta(minutes=5))
    assert check_id("m1", tick) != check_id("m2", tick)
    assert check_of(f"{check_id('m1', tick)}.3") == (check_id("m1", tick), 3)
    assert check_of("no-check") is None


def test_a_half_fired_tick_produces_only_its_missing_requests() -> None:
    """A successor that finds the intent produces what its partitions do not hold."""
    planned = (
        PlannedRequest(request_id="c.0", partition=1, offset_before=10, target_id="t0"),
        PlannedRequest(request_id="c.1", partition=2, offset_before=4, target_id="t1"),
    )
    assert missing(planned, {"c.0"}) == (planned[1],)
    assert missing(planned, {"c.0", "c.1"}) == ()


def test_adaptive_interval_halves_on_change_and_grows_by_half_otherwise() -> None:
    """StormCrawler's rule, bounded by the target's minimum and maximum."""
    rule = Adaptive(minimum=timedelta(minutes=10), maximum=timedelta(hours=2))
    assert rule.start() == timedelta(minutes=10)
    assert rule.next_interval(timedelta(hours=1), changed=True) == timedelta(minutes=30)
    assert rule.next_interval(timedelta(minutes=12), changed=True) == timedelta(minutes=10)
    assert rule.next_interval(timedelta(hours=1), changed=False) == timedelta(minutes=90)
    assert rule.next_interval(timedelta(minutes=100), changed=False) == timedelta(hours=2)
    assert Adaptive.due(None, timedelta(minutes=10), at("2026-12-03T10:00"))
    assert not Adaptive.due(at("2026-12-03T09:55"), timedelta(minutes=10), at("2026-12-03T10:00"))
    with pytest.raises(ValueError, match="minimum"):
        Adaptive(minimum=timedelta(hours=3), maximum=timedelta(hours=2))


def test_adaptive_targets_are_checked_when_their_interval_has_passed() -> None:
    """A plain target is in every tick; an adaptive one starts at its minimum, and its
    interval adapts once per check read (grows after a quiet check, halves after a change)
    before the tick decides whether it is due."""
    rule = Adaptive(minimum=timedelta(minutes=10), maximum=timedelta(hours=1))
    targets = [("plain", None), ("slow", rule)]
    first = plan_targets(targets, tick=at("2026-12-03T10:00"), intervals={}, checked={}, changed={})
    assert first.included == ("plain", "slow")
    assert first.intervals == {"slow": 600}
    quiet = plan_targets(
        targets,
        tick=at("2026-12-03T10:10"),
        intervals=first.intervals,
        checked=first.checked,
        changed={"slow": False},
    )
    assert quiet.included == ("plain",)  # 15 minutes now, 10 passed
    assert quiet.intervals == {"slow": 900}
    later = plan_targets(
        targets,
        tick=at("2026-12-03T10:15"),
        intervals=quiet.intervals,
        checked=quiet.checked,
        changed={},
    )
    assert later.included == ("plain", "slow")
    assert later.checked == {"slow": at("2026-12-03T10:15")}
    changed = plan_targets(
        targets,
        tick=at("2026-12-03T10:20"),
        intervals=later.intervals,
        checked=later.checked,
        changed={"slow": True},
    )
    assert changed.intervals == {"slow": 600}
    assert changed.included == ("plain",)


def test_a_check_of_some_targets_keeps_each_targets_index() -> None:
    tick = at("2026-12-03T10:05")
    check = check_id("m1", tick)
    [crawl] = check_requests(
        monitor(), check, trigger="scheduled", scheduled_for=tick, only={"t1"}, secret=KEY
    )
    assert crawl.request_id == f"{check}.1"


def monitor(**changes: object) -> MonitorRecord:
    now = at("2026-12-03T10:00")
    values: dict[str, object] = {
        "id": "m1",
        "name": "prices",
        "tenant": "acme",
        "schedule": ScheduleSpec(text="every 5 minutes"),
        "targets": (
            MonitorTarget(
                id="t0", type="scrape", urls=("https://example.com/a", "https://example.com/b")
            ),
            MonitorTarget(
                id="t1", type="crawl", urls=("https://example.com/",), crawl={"max_pages": 5}
            ),
        ),
        "tag": "monitor:m1",
        "created_at": now,
        "updated_at": now,
        "schedule_since": now,
    }
    return MonitorRecord.model_validate(values | changes)


def test_a_check_is_one_tracked_request_per_target() -> None:
    """Each target's request tracks changes under the monitor's tag with a diff, and names
    the monitor, the check and the target in its metadata."""
    tick = at("2026-12-03T10:05")
    check = check_id("m1", tick)
    scrape, crawl = check_requests(
        monitor(), check, trigger="scheduled", scheduled_for=tick, secret=KEY
    )
    assert scrape.request_id == f"{check}.0"
    assert scrape.urls == ["https://example.com/a", "https://example.com/b"]
    assert scrape.options.change_tracking is not None
    assert scrape.options.change_tracking.tag == "monitor:m1"
    assert scrape.options.change_tracking.diff
    assert scrape.options.max_age_ms == 0  # a check looks at the page, not the cache
    assert scrape.metadata["monitor"]["target_id"] == "t0"  # type: ignore[index,call-overload]
    assert scrape.metadata["tenant"] == "acme"
    assert crawl.crawl is not None
    assert crawl.crawl.max_pages == 5
    assert crawl.request_id == f"{check}.1"


def test_the_book_skips_unusable_records_and_follows_tombstones() -> None:
    """A monitor too fast for the minimum is left out; a tombstone deletes."""
    book = MonitorBook(min_interval=timedelta(seconds=60), secret=KEY)
    book.monitor_record(0, b"m1", signed_record(KEY, monitor()).model_dump_json().encode())
    book.monitor_record(0, b"m4", monitor(id="m4").model_dump_json().encode())  # unsigned
    fast = signed_record(KEY, monitor(id="m2", schedule=ScheduleSpec(text="every 5 seconds")))
    book.monitor_record(0, b"m2", fast.model_dump_json().encode())
    book.monitor_record(0, b"m3", b"{not json")
    assert [known.record.id for known in book.on(0)] == ["m1"]
    book.monitor_record(0, b"m1", None)
    assert book.on(0) == []


def test_the_book_names_the_ticks_of_deleted_monitors() -> None:
    """A tick whose monitor was tombstoned (or never read) is an orphan to tombstone; one
    whose monitor is there, even unusable, is not; a tick tombstone forgets it."""
    book = MonitorBook(min_interval=timedelta(seconds=60), secret=KEY)
    tick = MonitorTick(
        monitor_id="m1",
        scheduled_for=at("2026-12-03T10:05"),
        check_id="c",
        requests=(),
        fired_at=at("2026-12-03T10:05"),
    )
    for monitor_id in ("m1", "m2", "m3"):
        book.tick_record(
            1,
            monitor_id.encode(),
            tick.model_copy(update={"monitor_id": monitor_id}).model_dump_json().encode(),
        )
    book.monitor_record(1, b"m1", signed_record(KEY, monitor()).model_dump_json().encode())
    book.monitor_record(1, b"m2", b"{not json")
    assert book.orphans(1) == ["m3"]
    assert book.orphans(0) == []
    book.monitor_record(1, b"m1", None)
    assert sorted(book.orphans(1)) == ["m1", "m3"]
    book.tick_record(1, b"m3", None)
    assert book.orphans(1) == ["m1"]
    assert "m3" not in book.ticks


def result(url: str, status: ChangeStatus | None, *, ok: bool = True) -> PageResult:
    change = None if status is None else PageChange(status=status)
    return PageResult.model_validate(
        {
            "request_id": "c.0",
            "result_id": url,
            "run_id": "r",
            "url": url,
            "final_url": url,
            "ok": ok,
            "status_code": 200,
            "fetched_at": at("2026-12-03T10:00"),
            "change_tracking": change,
            "rendered_by": "http",
            "elapsed_ms": 1,
            "worker": "w",
        }
    )


def test_a_check_summary_counts_each_page_once() -> None:
    summary = summarise(
        [
            result("a", "new"),
            result("b", "changed"),
            result("b", "changed"),
            result("c", "same"),
            result("d", "removed"),
            result("e", None, ok=False),
        ]
    )
    assert summary.wire() == {
        "totalPages": 5,
        "same": 1,
        "changed": 1,
        "new": 1,
        "removed": 1,
        "error": 1,
    }
    assert CrawlOptions().change_tracking is None
