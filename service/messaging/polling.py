"""A background loop that reads a topic until it is stopped, whatever one reading raises."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

from aiokafka.errors import KafkaError

from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

    Batch = dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]

log = get_logger(__name__)

RETRY_S: Final = 0.5
"""Wait before the next reading after a failed one."""

STOP_S: Final = 10.0
"""Longest wait for the loop to end once told to stop."""

IDLE_POLL_MS: Final = 1000
"""How long one poll of a reader waits for records when nothing asks for it sooner. The
broker answers a fetch as soon as it has records, so this is not how late a record is read:
it is how often an idle reader wakes up. With its three readers polling every 100 ms and its
two consumers every 200 ms, an idle worker's own process cost 117-136 CPU ms a second in the
test suite's set-up; with 1 s polls, 22-32 (docs/decisions/idle-polls.md)."""

BRIEF_POLL_MS: Final = 100
"""A poll's wait while a caller waits for the reader to catch up (`Waiters`): a reader's
positions move when a poll returns, also one that brought nothing."""


class Waiters:
    """Callers waiting for a reader to reach an offset (its start, a record it wrote): while
    any waits, the reader polls briefly, else for `IDLE_POLL_MS`."""

    def __init__(self) -> None:
        self._count = 0

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        self._count += 1
        try:
            yield
        finally:
            self._count -= 1

    @property
    def poll_ms(self) -> int:
        return BRIEF_POLL_MS if self._count else IDLE_POLL_MS


async def records_or_wake(
    consumer: AIOKafkaConsumer, wake: asyncio.Event, timeout_ms: int = IDLE_POLL_MS
) -> Batch:
    """One `getmany` of a group-less consumer that returns early, with nothing, once `wake`
    is set. Cutting the poll short loses nothing: aiokafka hands fetched records out in one
    step after its last await, so a poll cancelled at that await leaves them buffered for
    the next. (Not for a group member: a cancelled poll leaves the consumer counted as
    fetching, which its group coordinator reads for `max_poll_interval_ms`.)"""
    if wake.is_set():
        return {}
    reading = asyncio.ensure_future(consumer.getmany(timeout_ms=timeout_ms))
    woken = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait((reading, woken), return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        reading.cancel()
        raise
    finally:
        woken.cancel()
    if reading.done():
        batch: Batch = reading.result()
        return batch
    reading.cancel()
    return {}


class PollLoop:
    """`loop = PollLoop(poll, name="hosts")`; `loop.start()`, then `poll` is awaited again and
    again until `await loop.stop()`.

    The loop is the boundary of every reading: a broker error or a timeout is logged
    (`{name}.poll_failed`) and the next reading comes after `retry_s`, and so does any other
    error (`{name}.poll_crashed`, with its traceback): a bug in one reading must not stop a
    reader every run relies on (cancels, placements, page records). It stops on a flag as
    well as by its cancel, and `stop` waits for it at most `stop_s`: on Python 3.11 an
    `asyncio.wait_for` inside a reading can swallow the cancel, and a close that waited for
    the task would then wait forever.
    """

    def __init__(
        self,
        poll: Callable[[], Awaitable[None]],
        *,
        name: str,
        retry_s: float = RETRY_S,
        stop_s: float = STOP_S,
    ) -> None:
        self._poll = poll
        self._name = name
        self._events = {
            step: f"{name}.poll_{step}" for step in ("failed", "crashed", "unstopped", "ended")
        }
        self._retry_s = retry_s
        self._stop_s = stop_s
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"{self._name}-poll")

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        # Not `wait_for`: on its timeout it waits for the cancel to take, which is what a
        # swallowed cancel never does.
        _, late = await asyncio.wait({task}, timeout=self._stop_s)
        if late:
            log.warning(self._events["unstopped"], stop_s=self._stop_s)
        elif not task.cancelled() and task.exception() is not None:
            log.error(self._events["ended"], error=repr(task.exception()))

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                await self._poll()
            except (KafkaError, TimeoutError, OSError) as exc:  # loop boundary
                log.warning(self._events["failed"], error=repr(exc))
                await asyncio.sleep(self._retry_s)
            except Exception:  # loop boundary: a bug must not stop the reader
                log.exception(self._events["crashed"])
                await asyncio.sleep(self._retry_s)
