"""Tasks started to run beside their starter, each kept until it is done; a wait that a stop
ends; where tasks wait."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final, TypeVar

from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Awaitable, Coroutine, Iterator

T = TypeVar("T")

log = get_logger(__name__)

WHERE_FRAMES: Final = 4
"""Frames of a task's chain of awaits that `awaiting_at` names, innermost first."""


class Background:
    """`tasks = Background()`; `tasks.start(work())` runs `work` beside the caller.

    The event loop keeps only a weak reference to a task, so one nobody holds may be
    collected before it is done: each is held here until it is, then dropped. Its owner
    waits for them (`wait`) or stops them (`cancel`) when it closes.
    """

    __slots__ = ("_tasks",)

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        return self.keep(asyncio.create_task(work))

    def keep(self, task: asyncio.Task[T]) -> asyncio.Task[T]:
        """Hold a task started elsewhere until it is done."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(list(self._tasks))

    async def wait(self, timeout_s: float | None = None) -> set[asyncio.Task[Any]]:
        """Wait until every task is done, at most `timeout_s`; the tasks still running then."""
        if not self._tasks:
            return set()
        _, late = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        return late

    async def cancel(self) -> None:
        """Cancel every task and wait until each has ended (its errors are not raised)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def awaiting_at(task: asyncio.Task[Any]) -> str:
    """Where a task waits: the innermost frames of its chain of awaits, `file:line name`
    (`Task.get_stack` gives only the outermost frame of a suspended coroutine)."""
    frames = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return " < ".join(
        f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno} {frame.f_code.co_name}"
        for frame in reversed(frames[-WHERE_FRAMES:])
    )


def log_tasks() -> None:
    """Log where every task of the running loop waits, one `task.waiting` line each, then
    `tasks.logged` (the worker does this on SIGUSR1: a replica that seems stuck says why)."""
    tasks = asyncio.all_tasks()
    for task in tasks:
        log.warning("task.waiting", task=task.get_name(), at=awaiting_at(task))
    log.warning("tasks.logged", tasks=len(tasks))


async def unless_set(stop: asyncio.Event, work: Awaitable[T]) -> T | None:
    """`work`'s result, or None when `stop` is set first. `work` is then cancelled and not
    awaited (a wait that swallows its cancel would never end)."""
    working = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({working, stopping}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        working.cancel()
        raise
    finally:
        stopping.cancel()
    if not working.done():
        working.cancel()
        return None
    return working.result()
