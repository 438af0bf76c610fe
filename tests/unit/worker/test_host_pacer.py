"""`crawl.delay_ms`: the starts of one run's pages of a host are spaced; other hosts and other
runs are not."""

from __future__ import annotations

import asyncio

from service.worker.fetcher.politeness import HostPacer


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))


async def test_pages_of_one_host_wait_their_turn_other_hosts_do_not() -> None:
    """Three pages of a.test start 0.5 s apart; b.test's first page starts at once."""
    clock = _Clock()
    pacer = HostPacer(clock=lambda: clock.now, sleep=clock.sleep)
    await asyncio.gather(*(pacer.turn("r1", "a.test", 0.5) for _ in range(3)))
    await pacer.turn("r1", "b.test", 0.5)
    assert clock.slept == [0.5, 1.0]
    clock.now += 5.0  # long after: no wait
    await pacer.turn("r1", "a.test", 0.5)
    assert clock.slept == [0.5, 1.0]


async def test_runs_are_paced_apart() -> None:
    """Another run's pages of the same host keep their own pace (each run has its delay)."""
    clock = _Clock()
    pacer = HostPacer(clock=lambda: clock.now, sleep=clock.sleep)
    await pacer.turn("r1", "a.test", 2.0)
    await pacer.turn("r2", "a.test", 0.5)
    await pacer.turn("r2", "a.test", 0.5)
    assert clock.slept == [0.5]


async def test_no_delay_never_waits() -> None:
    """`delay_s` 0 returns at once, whatever came before."""

    async def sleep(seconds: float) -> None:
        raise AssertionError(seconds)

    pacer = HostPacer(sleep=sleep)
    for _ in range(5):
        await pacer.turn("r1", "a.test", 0.0)
