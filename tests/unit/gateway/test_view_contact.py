"""A job view whose broker is gone says it is not live (a fake consumer: a fetch from a gone
broker returns nothing, the question for the partitions' ends fails)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka.errors import KafkaConnectionError
from waiting import until

from service.gateway import view_reader
from service.gateway.jobs import JobView
from service.gateway.view_reader import CONTACT_EVERY_S, ViewReader
from service.messaging.polling import BRIEF_POLL_MS, IDLE_POLL_MS
from service.settings import Settings


class GoneBroker:
    """Fetches return nothing; the partitions' ends fail until `back` is set."""

    def __init__(self, **_: Any) -> None:
        self.back = False
        self.polls: list[int] = []

    def assignment(self) -> set[Any]:
        return set()

    async def getmany(self, timeout_ms: int) -> dict[Any, list[Any]]:
        self.polls.append(timeout_ms)
        await asyncio.sleep(timeout_ms / 1000 / 100)
        return {}

    async def end_offsets(self, partitions: list[Any]) -> dict[Any, int]:  # noqa: ARG002
        if not self.back:
            raise KafkaConnectionError("the broker is gone")
        return {}


async def test_a_view_that_reads_nothing_asks_the_broker_and_is_not_live_while_it_fails(
    monkeypatch,
):
    """Silent fetches alone keep the view live; once nothing was read for `CONTACT_EVERY_S`
    the view asks for the ends, is not live while that fails, and live again once it
    answers."""
    monkeypatch.setattr(view_reader, "AIOKafkaConsumer", GoneBroker)
    monkeypatch.setattr(view_reader, "RETRY_MAX_S", 0.01)
    reader = ViewReader(Settings(), JobView())
    broker: GoneBroker = reader._consumer  # type: ignore[assignment]  # noqa: SLF001
    task = asyncio.create_task(reader._run({}))  # noqa: SLF001
    try:
        await until(reader.ready.is_set)
        assert reader.live
        reader._contact = time.monotonic() - CONTACT_EVERY_S - 1  # noqa: SLF001
        await until(lambda: not reader.live)
        broker.back = True
        await until(lambda: reader.live)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_ready_idle_view_polls_once_a_second_and_briefly_while_a_caller_waits(
    monkeypatch,
):
    """The view's positions move when a poll returns: until it is ready, and while a
    `caught_up` caller waits, polls are brief; an idle ready view waits a second for
    records (5 wake-ups a second for nothing before, on every gateway replica)."""
    monkeypatch.setattr(view_reader, "AIOKafkaConsumer", GoneBroker)
    reader = ViewReader(Settings(), JobView())
    broker: GoneBroker = reader._consumer  # type: ignore[assignment]  # noqa: SLF001
    broker.back = True
    task = asyncio.create_task(reader._run({}))  # noqa: SLF001
    try:
        await until(reader.ready.is_set)
        ready_at = len(broker.polls)
        await until(lambda: len(broker.polls) >= ready_at + 2)
        with reader._waiters.waiting():  # noqa: SLF001 (a caller in `caught_up`)
            waiting_at = len(broker.polls)
            await until(lambda: BRIEF_POLL_MS in broker.polls[waiting_at:])
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert broker.polls[0] == BRIEF_POLL_MS
    assert set(broker.polls[ready_at + 1 : waiting_at]) == {IDLE_POLL_MS}
