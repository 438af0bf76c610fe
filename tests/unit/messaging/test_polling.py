"""A reading loop survives what one reading raises, and stops even when a cancel is lost."""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka.errors import KafkaConnectionError
from structlog.testing import capture_logs
from waiting import until

from service.messaging.polling import PollLoop, records_or_wake


async def test_a_broker_error_and_a_bug_are_logged_and_reading_goes_on():
    raised = [KafkaConnectionError("broker gone"), ValueError("a bug in one reading")]
    readings: list[int] = []

    async def poll() -> None:
        readings.append(1)
        if raised:
            raise raised.pop(0)
        await asyncio.sleep(0.01)

    loop = PollLoop(poll, name="test", retry_s=0.01)
    with capture_logs() as logs:
        loop.start()
        await until(lambda: len(readings) >= 4)
        await loop.stop()

    # only this loop's events: a task another test left behind may log meanwhile
    events = [(e["event"], e["log_level"]) for e in logs if e["event"].startswith("test.")]
    assert events == [("test.poll_failed", "warning"), ("test.poll_crashed", "error")]


async def test_a_reading_that_swallows_its_cancel_still_ends_at_the_flag():
    """As `asyncio.wait_for` on Python 3.11 can: the cancel is lost, the loop sees the flag."""
    readings: list[int] = []

    async def poll() -> None:
        readings.append(1)
        with contextlib.suppress(asyncio.CancelledError):  # swallowed
            await asyncio.sleep(0.05)

    loop = PollLoop(poll, name="test")
    loop.start()
    await until(lambda: readings)
    await asyncio.wait_for(loop.stop(), 5)
    stopped_at = len(readings)
    assert not [task for task in asyncio.all_tasks() if task.get_name() == "test-poll"]
    await asyncio.sleep(0)
    assert len(readings) == stopped_at


async def test_stop_is_bounded_when_a_reading_never_ends():
    """The short `stop_s` is this test's: the default is 10 s."""
    forever = asyncio.Event()

    async def poll() -> None:
        while not forever.is_set():  # a reading that ignores every cancel
            with contextlib.suppress(asyncio.CancelledError):
                await forever.wait()

    loop = PollLoop(poll, name="test", stop_s=0.1)
    loop.start()
    await asyncio.sleep(0)
    with capture_logs() as logs:
        await asyncio.wait_for(loop.stop(), 5)
    assert [entry["event"] for entry in logs] == ["test.poll_unstopped"]
    forever.set()  # the reading ends, and the loop with it: it was told to stop
    await until(lambda: not [t for t in asyncio.all_tasks() if t.get_name() == "test-poll"])


class _Consumer:
    """As aiokafka's `getmany`: waits for records up to its timeout, then hands out what was
    fetched in one step after its last await."""

    def __init__(self) -> None:
        self.fetched: list[str] = []
        self.arrived = asyncio.Event()

    async def getmany(self, timeout_ms: int) -> dict[str, list[str]]:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.arrived.wait(), timeout_ms / 1000)
        self.arrived.clear()
        taken, self.fetched = self.fetched, []
        return {"tp": taken} if taken else {}

    def fetch(self, record: str) -> None:
        self.fetched.append(record)
        self.arrived.set()


async def test_a_woken_poll_returns_at_once_and_loses_no_record():
    """A reader whose followed partitions change need not wait out an idle poll (an hour
    here): the poll ends with nothing, and records that come later are the next poll's."""
    consumer = _Consumer()
    wake = asyncio.Event()
    async with asyncio.timeout(5):
        polling = asyncio.create_task(records_or_wake(consumer, wake, timeout_ms=3_600_000))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        wake.set()
        assert await polling == {}
        wake.clear()
        consumer.fetch("a")
        assert await records_or_wake(consumer, wake, timeout_ms=3_600_000) == {"tp": ["a"]}  # type: ignore[arg-type]
