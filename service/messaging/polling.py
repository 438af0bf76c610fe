"""A background loop that reads a topic until it is stopped, whatever one reading raises."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from aiokafka.errors import KafkaError

from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

log = get_logger(__name__)

RETRY_S: Final = 0.5
"""Wait before the next reading after a failed one."""

STOP_S: Final = 10.0
"""Longest wait for the loop to end once told to stop."""


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
