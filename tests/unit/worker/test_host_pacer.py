"""`crawl.delay_ms`: the starts of one run's pages of a host are spaced, counted from when
each page started (was given its slot), not from when it was given its turn; other hosts and
other runs are not paced together."""

from __future__ import annotations

import asyncio

import pytest

from service.worker.fetcher.politeness import HostPacer


class _Clock:
    """A clock that moves only when slept on (or moved by the test)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


def _pacer(clock: _Clock) -> HostPacer:
    return HostPacer(clock=lambda: clock.now, sleep=clock.sleep)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_pages_of_one_host_wait_their_turn_other_hosts_do_not() -> None:
    """Three pages of a.test, each started at its turn, start 0.5 s apart; b.test's first
    page starts at once; long after, a.test's next page does too."""
    clock = _Clock()
    pacer = _pacer(clock)
    starts = []
    for _ in range(3):
        (await pacer.turn("r1", "a.test", 0.5)).started()
        starts.append(clock.now)
    (await pacer.turn("r1", "b.test", 0.5)).started()
    assert starts == [100.0, 100.5, 101.0]
    assert clock.slept == [0.5, 0.5]
    clock.now += 5.0
    (await pacer.turn("r1", "a.test", 0.5)).started()
    assert clock.slept == [0.5, 0.5]


async def test_a_page_that_waits_for_its_slot_pushes_the_next_one_back() -> None:
    """The first page's turn comes at once, then it waits 3 s for a slot: the second page
    (taken meanwhile) may not start 0.5 s after the first's turn, in a burst with it, but
    0.5 s after the first actually started."""
    clock = _Clock()
    pacer = _pacer(clock)
    first = await pacer.turn("r1", "a.test", 0.5)
    second = asyncio.create_task(pacer.turn("r1", "a.test", 0.5))
    await _settle()
    assert not second.done()
    clock.now += 3.0  # the first page waits for a slot
    first.started()
    (await second).started()
    assert clock.now == 103.5
    assert clock.slept == [0.5]


async def test_a_page_that_gives_up_before_starting_lets_the_next_one_go() -> None:
    """A page that ends before it starts (cancelled, failed before its slot) does not count
    as a start: the next page's turn is counted from the last page that did start."""
    clock = _Clock()
    pacer = _pacer(clock)
    (await pacer.turn("r1", "a.test", 0.5)).started()
    clock.now += 2.0
    (await pacer.turn("r1", "a.test", 0.5)).give_up()
    (await pacer.turn("r1", "a.test", 0.5)).started()
    assert clock.slept == []


async def test_a_page_cancelled_while_waiting_for_its_turn_frees_the_lane() -> None:
    """A page cancelled during its wait lets the next page ask for the turn."""
    now = [100.0]
    forever = asyncio.Event()

    async def sleep(seconds: float) -> None:
        await forever.wait()

    pacer = HostPacer(clock=lambda: now[0], sleep=sleep)
    (await pacer.turn("r1", "a.test", 30.0)).started()
    waiting = asyncio.create_task(pacer.turn("r1", "a.test", 30.0))
    await _settle()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    now[0] += 30.0
    turn = await asyncio.wait_for(pacer.turn("r1", "a.test", 30.0), timeout=5)
    turn.started()


async def test_runs_are_paced_apart() -> None:
    """Another run's pages of the same host keep their own pace (each run has its delay)."""
    clock = _Clock()
    pacer = _pacer(clock)
    (await pacer.turn("r1", "a.test", 2.0)).started()
    (await pacer.turn("r2", "a.test", 0.5)).started()
    (await pacer.turn("r2", "a.test", 0.5)).started()
    assert clock.slept == [0.5]


async def test_no_delay_never_waits() -> None:
    """`delay_s` 0 returns at once, whatever came before."""

    async def sleep(seconds: float) -> None:
        raise AssertionError(seconds)

    pacer = HostPacer(sleep=sleep)
    for _ in range(5):
        (await pacer.turn("r1", "a.test", 0.0)).started()
