"""Tasks started to run beside their starter, each kept until it is done."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator

T = TypeVar("T")


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
