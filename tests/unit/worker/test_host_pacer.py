"""`crawl.delay_ms`: the starts of one crawl's pages of a host are spaced, other hosts not."""

from __future__ import annotations

import asyncio

from service.worker.deep import HostPacer


async def test_pages_of_one_host_wait_their_turn_other_hosts_do_not() -> None:
    now = [100.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))

    pacer = HostPacer(0.5, clock=lambda: now[0], sleep=sleep)
    await asyncio.gather(*(pacer.turn("a.test") for _ in range(3)))
    await pacer.turn("b.test")
    assert slept == [0.5, 1.0]  # the first of a.test and b.test's page start at once
    now[0] += 5.0  # long after: no wait
    await pacer.turn("a.test")
    assert slept == [0.5, 1.0]


async def test_no_delay_never_waits() -> None:
    async def sleep(seconds: float) -> None:
        raise AssertionError(seconds)

    pacer = HostPacer(0.0, sleep=sleep)
    for _ in range(5):
        await pacer.turn("a.test")
