"""The per-host render decision of `auto`: learned from streaks, expiring, bounded."""

from __future__ import annotations

from service.paths.learner import HostRenderMemory


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _memory(clock: Clock, **overrides: float) -> HostRenderMemory:
    options: dict[str, int | float] = {"threshold": 3, "ttl_s": 600.0, "max_pages": 100}
    return HostRenderMemory(clock=clock, **(options | overrides))  # type: ignore[arg-type]


def test_a_host_goes_to_the_browser_after_three_pages_in_a_row_needed_it():
    memory = _memory(Clock())
    for _ in range(2):
        memory.needed_browser("spa.test")
        assert not memory.straight_to_browser("spa.test")
    memory.needed_browser("spa.test")
    assert memory.straight_to_browser("spa.test")
    assert not memory.straight_to_browser("other.test")


def test_a_static_page_breaks_the_streak_so_mixed_hosts_stay_on_http():
    """Nine static pages in ten, the tenth script-rendered: the host never switches."""
    memory = _memory(Clock())
    for n in range(300):
        if n % 10 == 9:
            memory.needed_browser("mixed.test")
        else:
            memory.static_sufficed("mixed.test")
        assert not memory.straight_to_browser("mixed.test")


def test_the_decision_expires_after_its_ttl_and_one_probe_renews_it():
    clock = Clock()
    memory = _memory(clock)
    for _ in range(3):
        memory.needed_browser("spa.test")
    clock.now = 599.0
    assert memory.straight_to_browser("spa.test")
    clock.now = 600.0
    assert not memory.straight_to_browser("spa.test")  # this page probes HTTP
    memory.needed_browser("spa.test")  # ... and needed the browser again
    assert memory.straight_to_browser("spa.test")


def test_a_probe_that_finds_a_static_page_puts_the_host_back_on_http():
    clock = Clock()
    memory = _memory(clock)
    for _ in range(3):
        memory.needed_browser("spa.test")
    clock.now = 601.0
    assert not memory.straight_to_browser("spa.test")
    memory.static_sufficed("spa.test")
    memory.needed_browser("spa.test")
    assert not memory.straight_to_browser("spa.test")


def test_the_decision_expires_after_max_pages():
    memory = _memory(Clock(), max_pages=5)
    for _ in range(3):
        memory.needed_browser("spa.test")
    assert [memory.straight_to_browser("spa.test") for _ in range(6)] == [True] * 5 + [False]


def test_hosts_beyond_the_bound_are_forgotten_least_recent_first():
    memory = _memory(Clock(), max_hosts=2)
    for host in ("a.test", "b.test"):
        for _ in range(3):
            memory.needed_browser(host)
    assert memory.straight_to_browser("a.test")  # a is now the most recent
    memory.static_sufficed("c.test")
    assert len(memory) == 2
    assert memory.straight_to_browser("a.test")
    assert not memory.straight_to_browser("b.test")


def test_a_threshold_of_zero_never_learns():
    memory = _memory(Clock(), threshold=0)
    for _ in range(50):
        memory.needed_browser("spa.test")
    assert not memory.straight_to_browser("spa.test")
