"""A host that answered 429, 503 or a challenge page: every page of it waits on the fetcher
that owns it, other hosts do not; a later, shorter answer does not shorten the wait."""

from __future__ import annotations

from service.worker.fetcher.politeness import HOST_BACKOFF_REASONS, HostBackoff


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


async def test_every_page_of_a_host_waits_out_its_backoff_other_hosts_do_not() -> None:
    clock = _Clock()
    backoff = HostBackoff(clock=lambda: clock.now, sleep=clock.sleep)
    backoff.back_off("a.test", 2.0)
    assert backoff.waiting_s("b.test") == 0.0
    await backoff.turn("b.test")
    assert clock.slept == []
    clock.now += 0.5
    backoff.back_off("a.test", 1.0)  # shorter than what is left: kept at 1.5 s
    assert backoff.waiting_s("a.test") == 1.5
    await backoff.turn("a.test")
    assert clock.slept == [1.5]
    assert backoff.waiting_s("a.test") == 0.0


async def test_a_longer_answer_extends_the_wait() -> None:
    clock = _Clock()
    backoff = HostBackoff(clock=lambda: clock.now, sleep=clock.sleep)
    backoff.back_off("a.test", 1.0)
    backoff.back_off("a.test", 3.0)
    await backoff.turn("a.test")
    assert clock.slept == [3.0]


def test_the_answers_that_speak_for_the_host() -> None:
    """A connection reset is about one connection, a 429 or a challenge about the host."""
    assert {"http_429", "http_503", "blocked_by_site"} == HOST_BACKOFF_REASONS
    assert "connection" not in HOST_BACKOFF_REASONS
