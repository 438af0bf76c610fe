"""The memory governor, driven by synthetic snapshots: admission, AIMD, cost, pause, shed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from service.backpressure import (
    AdmissionReason,
    Governor,
    Level,
    LimitSource,
    MemorySnapshot,
    PauseReason,
    newest_first,
)
from service.errors import ConfigurationError

MIB = 1 << 20
LIMIT_MIB = 2000
WINDOW = 2.0


def snap(used_mib: float, *, limit_mib: int = LIMIT_MIB, at: float = 0.0) -> MemorySnapshot:
    used = int(used_mib * MIB)
    return MemorySnapshot(
        limit_bytes=limit_mib * MIB,
        working_set_bytes=used,
        tree_pss_bytes=used,
        source=LimitSource.CGROUP_V2,
        taken_at=at,
    )


def governor(**overrides: object) -> Governor:
    options: dict[str, object] = {
        "floor": 1,
        "safety_margin_bytes": 100 * MIB,
        "increase_window_s": WINDOW,
        "decrease_cooldown_s": 1.0,
        "shed_settle_s": 1.0,
    } | overrides
    return Governor(8, **options)  # type: ignore[arg-type]


def grow(gov: Governor, *, windows: int, used_mib: float = 100, start: float = 0.0) -> float:
    """Feed comfortable idle snapshots for `windows` increase windows; returns the last time."""
    now = start
    for _ in range(windows + 1):
        gov.observe(snap(used_mib, at=now), in_flight=0, now=now)
        now += WINDOW
    return now - WINDOW


def test_the_limit_starts_at_the_floor_and_doubles_per_comfortable_window_until_pressure():
    """Slow start: a fresh governor doubles its limit each comfortable window."""
    gov = governor()
    assert gov.limit == 1
    grow(gov, windows=2)
    assert gov.limit == 4


def test_after_pressure_the_limit_grows_by_one_page_per_comfortable_window():
    """Additive increase once memory has pushed back: one page per comfortable window."""
    gov = governor()
    grow(gov, windows=3)
    assert gov.limit == 8
    gov.observe(snap(0.9 * LIMIT_MIB), in_flight=0, now=100.0)
    assert gov.limit == 4
    for window in range(1, 4):
        gov.observe(snap(100), in_flight=0, now=200.0 + window * WINDOW)
    assert gov.limit == 6


def test_samples_inside_one_window_do_not_grow_the_limit():
    """Growth waits for the whole window, however many samples arrive."""
    gov = governor()
    for step in range(8):
        gov.observe(snap(100), in_flight=0, now=step * WINDOW / 8)
    assert gov.limit == 1


def test_a_sample_that_is_not_comfortable_restarts_the_window():
    """Memory between the resume and pause ratios holds the limit and restarts the window."""
    gov = governor()
    gov.observe(snap(100), in_flight=0, now=0.0)
    gov.observe(snap(0.8 * LIMIT_MIB), in_flight=0, now=1.5)
    gov.observe(snap(100), in_flight=0, now=2.5)
    assert gov.limit == 1
    gov.observe(snap(100), in_flight=0, now=4.5)
    assert gov.limit == 2


def test_the_ceiling_caps_growth_and_admission():
    """However long memory stays comfortable, the limit stops at the ceiling."""
    gov = governor()
    grow(gov, windows=20)
    assert gov.limit == 8
    assert gov.admission(snap(100), in_flight=8).reason is AdmissionReason.LIMIT


def test_the_limit_grows_only_while_every_free_slot_would_fit():
    """Growth stops where the free slots times the page cost no longer fit in the headroom."""
    gov = governor()
    grow(gov, windows=20, used_mib=LIMIT_MIB - 900)  # util 0.55: comfortable
    assert gov.limit == 5  # 5 slots x 150 MiB + 100 MiB margin = 850 MiB <= 900 MiB < 1000 MiB


def test_pressure_halves_the_limit_at_most_once_per_cooldown_and_never_below_the_floor():
    """Multiplicative decrease on pressure, spaced by the cooldown, bounded by the floor."""
    gov = governor(floor=1)
    now = grow(gov, windows=20)
    high = 0.87 * LIMIT_MIB
    limits = []
    for step in (1.0, 1.5, 2.0, 3.0, 4.0, 5.0):
        gov.observe(snap(high, at=now + step), in_flight=2, now=now + step)
        limits.append(gov.limit)
    assert limits == [4, 4, 2, 1, 1, 1]


def test_admission_needs_headroom_for_one_more_page_plus_the_margin():
    """Under the limit, a page starts only when headroom covers its cost and the margin."""
    gov = governor()
    grow(gov, windows=20)
    assert gov.admission(snap(1000), in_flight=3).reason is AdmissionReason.HEADROOM
    assert gov.admit(snap(LIMIT_MIB - 251), in_flight=3)
    assert not gov.admit(snap(LIMIT_MIB - 249), in_flight=3)
    assert gov.admission(snap(1800), in_flight=3).reason is AdmissionReason.NO_HEADROOM


def test_pages_that_have_not_allocated_yet_hold_their_share_of_the_headroom():
    """Between two samples the admissions stop once the pages started since the snapshot,
    each at the page cost, would fill the headroom; a page still loading holds its share."""
    gov = governor()
    grow(gov, windows=20)  # idle at 100 MiB: the baseline; the limit at its ceiling, 8
    before_any_page = snap(100, limit_mib=1000)  # 900 MiB headroom: 150 MiB pages, 100 margin
    started = 0
    while gov.admit(before_any_page, in_flight=started):
        started += 1
    assert started == 5  # the fifth needs 5 x 150 + 100 = 850 MiB, the sixth 1,000
    assert gov.admission(before_any_page, in_flight=5).reason is AdmissionReason.NO_HEADROOM
    loaded = snap(100 + 5 * 150 - 1, limit_mib=1000)  # the five have allocated (less a MiB)
    assert not gov.admit(loaded, in_flight=5)  # 150 MiB free: less than a page and the margin
    assert gov.admit(snap(100 + 2 * 150, limit_mib=1000), in_flight=2)  # two loaded: 600 free


def test_the_floor_always_admits_unless_critical_with_a_page_in_flight():
    """A replica always makes progress, but not by adding a page at the critical level."""
    gov = governor(floor=2)
    assert gov.admission(snap(1800), in_flight=1).reason is AdmissionReason.FLOOR
    critical = snap(0.95 * LIMIT_MIB)
    assert gov.admission(critical, in_flight=1).reason is AdmissionReason.CRITICAL
    assert gov.admission(critical, in_flight=0).reason is AdmissionReason.FLOOR


def test_the_learned_cost_converges_to_the_true_cost_per_page_from_above():
    """From the conservative initial guess down to the measured delta per open page."""
    gov = governor()
    gov.observe(snap(400), in_flight=0, now=0.0)
    for step in range(120):
        in_flight = step % 6 + 1
        gov.observe(snap(400 + 60 * in_flight), in_flight=in_flight, now=float(step))
    assert abs(gov.page_cost_bytes - 60 * MIB) < MIB


def test_the_learned_cost_rises_quickly_to_a_larger_true_cost():
    """Pages dearer than the guess are adopted within a few samples."""
    gov = governor(initial_page_cost_bytes=50 * MIB)
    gov.observe(snap(400), in_flight=0, now=0.0)
    for step in range(10):
        gov.observe(snap(400 + 2 * 200), in_flight=2, now=float(step))
    assert abs(gov.page_cost_bytes - 200 * MIB) < MIB


def test_the_learned_cost_ignores_pages_that_have_not_grown_and_keeps_its_minimum():
    """Readings at or below the idle baseline teach nothing; tiny deltas stop at the minimum."""
    gov = governor()
    gov.observe(snap(400), in_flight=0, now=0.0)
    gov.observe(snap(390), in_flight=3, now=1.0)
    assert gov.page_cost_bytes == 150 * MIB
    for step in range(200):
        gov.observe(snap(401), in_flight=1, now=2.0 + step)
    assert 24 * MIB <= gov.page_cost_bytes < 25 * MIB


def test_pause_and_resume_do_not_flap_around_the_pause_threshold():
    """Once paused for memory, only memory below the resume ratio and a drained backlog resume."""
    gov = governor()
    around_pause = [0.84, 0.86, 0.84, 0.86, 0.84, 0.86, 0.8, 0.72]
    answers = [
        gov.should_pause(snap(ratio * LIMIT_MIB), in_flight=2, backlog=5, backlog_capacity=10)
        for ratio in around_pause
    ]
    assert answers == [False, True, True, True, True, True, True, True]
    assert gov.pause_reason is PauseReason.MEMORY
    assert not gov.should_pause(snap(0.65 * LIMIT_MIB), in_flight=2, backlog=5, backlog_capacity=10)
    around_resume = [0.69, 0.71, 0.69, 0.71, 0.84]
    assert not any(
        gov.should_pause(snap(ratio * LIMIT_MIB), in_flight=2, backlog=5, backlog_capacity=10)
        for ratio in around_resume
    )
    assert gov.pause_count == 1


def test_memory_recovered_but_a_full_backlog_keeps_the_partitions_paused():
    """Resuming needs the backlog at its low-water mark too."""
    gov = governor()
    assert gov.should_pause(snap(0.9 * LIMIT_MIB), in_flight=1, backlog=10, backlog_capacity=10)
    assert gov.should_pause(snap(0.5 * LIMIT_MIB), in_flight=1, backlog=6, backlog_capacity=10)
    assert not gov.should_pause(snap(0.5 * LIMIT_MIB), in_flight=1, backlog=5, backlog_capacity=10)


def test_a_full_backlog_pauses_only_when_no_page_can_start():
    """A full backlog with a free slot keeps consuming; with none, the partitions pause."""
    gov = governor()
    grow(gov, windows=1)
    assert not gov.should_pause(snap(100), in_flight=1, backlog=10, backlog_capacity=10)
    assert gov.should_pause(snap(100), in_flight=2, backlog=10, backlog_capacity=10)
    assert gov.pause_reason is PauseReason.BACKLOG
    assert gov.should_pause(snap(0.75 * LIMIT_MIB), in_flight=2, backlog=8, backlog_capacity=10)
    assert not gov.should_pause(snap(0.75 * LIMIT_MIB), in_flight=2, backlog=5, backlog_capacity=10)


def test_a_starving_replica_is_never_left_paused():
    """With no backlog and fewer pages than the floor, the partitions resume whatever memory."""
    gov = governor()
    assert gov.should_pause(snap(0.9 * LIMIT_MIB), in_flight=1, backlog=3, backlog_capacity=10)
    assert not gov.should_pause(snap(0.9 * LIMIT_MIB), in_flight=0, backlog=0, backlog_capacity=10)
    assert not gov.paused


def test_nothing_is_shed_below_the_critical_level():
    """High memory pauses and cuts the limit but hands nothing back."""
    assert governor().shed(snap(0.9 * LIMIT_MIB), in_flight=5) == 0


def test_critical_memory_sheds_enough_newest_pages_to_get_below_the_pause_ratio():
    """1900 MiB used, pause line at 1700 MiB, 150 MiB a page: two pages go back."""
    gov = governor()
    assert gov.shed(snap(1900, at=10.0), in_flight=5) == 2
    assert newest_first(["a", "b", "c", "d", "e"], 2) == ["e", "d"]
    assert newest_first(["a", "b"], 0) == []


def test_shedding_waits_for_the_last_handed_back_pages_to_close():
    """The same or a too-recent snapshot does not shed twice."""
    gov = governor()
    assert gov.shed(snap(1900, at=10.0), in_flight=5) == 2
    assert gov.shed(snap(1900, at=10.0), in_flight=3) == 0
    assert gov.shed(snap(1900, at=10.5), in_flight=3) == 0
    assert gov.shed(snap(1900, at=11.0), in_flight=3) == 2


def test_shedding_keeps_the_last_page_unless_at_the_hard_limit():
    """At the critical level one page stays in flight; at the hard limit it goes too."""
    assert governor().shed(snap(1900), in_flight=1) == 0
    assert governor().shed(snap(1900), in_flight=2) == 1
    assert governor().shed(snap(0.99 * LIMIT_MIB), in_flight=1) == 1
    assert governor().shed(snap(0.99 * LIMIT_MIB), in_flight=0) == 0


def test_the_browser_is_recycled_after_enough_pages_or_growth():
    """Either threshold triggers a recycle."""
    gov = governor(recycle_after_pages=100, recycle_growth_bytes=500 * MIB)
    assert not gov.should_recycle_browser(99, 499 * MIB)
    assert gov.should_recycle_browser(100, 0)
    assert gov.should_recycle_browser(0, 500 * MIB)


def test_levels_follow_the_ratios():
    """Comfortable < resume <= steady < pause <= high < critical <= critical."""
    gov = governor()
    levels = [gov.level(snap(ratio * LIMIT_MIB)) for ratio in (0.5, 0.7, 0.85, 0.92)]
    assert levels == [Level.COMFORTABLE, Level.STEADY, Level.HIGH, Level.CRITICAL]


@pytest.mark.parametrize(
    ("resume", "pause", "critical"), [(0.8, 0.7, 0.9), (0.7, 0.95, 0.9), (0.0, 0.5, 0.9)]
)
def test_ratios_out_of_order_are_a_configuration_error(resume, pause, critical):
    """Hysteresis needs resume < pause < critical."""
    with pytest.raises(ConfigurationError):
        governor(resume_ratio=resume, pause_ratio=pause, critical_ratio=critical)


def test_a_floor_above_the_ceiling_is_a_configuration_error():
    """The floor and ceiling bound the limit."""
    with pytest.raises(ConfigurationError):
        Governor(2, floor=3, safety_margin_bytes=0)


@dataclass(frozen=True)
class _Settings:
    max_page_slots: int = 6
    min_page_slots: int = 2
    memory_safety_margin: int = 64 * MIB
    memory_resume_ratio: float = 0.6
    memory_pause_ratio: float = 0.8
    memory_critical_ratio: float = 0.9
    initial_page_cost: int = 80 * MIB
    browser_recycle_pages: int = 10
    browser_recycle_growth: int = 100 * MIB


def test_from_settings_uses_the_slots_margin_ratios_cost_and_recycle_thresholds():
    """The governor is built from the settings tree."""
    gov = Governor.from_settings(_Settings())
    assert (gov.limit, gov.page_cost_bytes) == (2, 80 * MIB)
    assert gov.level(snap(0.8 * LIMIT_MIB)) is Level.HIGH
    assert gov.should_recycle_browser(10, 0)


def test_a_full_backlog_pauses_when_every_waiting_page_waits_for_its_host():
    """Memory would admit more pages, but every waiting page waits for its host's limit:
    nothing can start, so a full backlog pauses intake (before, the worker kept taking
    requests of that host: 200 pages for a bound of 40)."""
    gov = governor()
    calm = snap(0.1 * LIMIT_MIB)
    assert gov.admit(calm, 0)
    assert not gov.should_pause(calm, in_flight=0, backlog=40, backlog_capacity=40)
    assert gov.should_pause(calm, in_flight=0, backlog=40, backlog_capacity=40, startable=False)
