"""Background tasks are held until done, waited for with a deadline, or cancelled."""

from __future__ import annotations

import asyncio
import gc

from service.background import Background


async def test_a_started_task_is_held_until_done_and_then_dropped():
    tasks = Background()
    gate = asyncio.Event()
    done: list[int] = []

    async def work() -> None:
        await gate.wait()
        done.append(1)

    tasks.start(work())
    gc.collect()  # the loop's own reference is weak: only the set keeps it alive
    assert len(tasks) == 1
    gate.set()
    assert await tasks.wait(1.0) == set()
    assert (done, len(tasks)) == ([1], 0)


async def test_wait_returns_what_is_still_running_at_its_deadline():
    tasks = Background()
    slow = tasks.start(asyncio.sleep(30))
    tasks.start(asyncio.sleep(0))

    late = await tasks.wait(0.05)

    assert late == {slow}
    await tasks.cancel()
    assert slow.cancelled()
    assert len(tasks) == 0


async def test_cancel_ends_every_task_without_raising_their_errors():
    tasks = Background()

    async def fails() -> None:
        raise ValueError("its own error")

    failing = tasks.start(fails())
    hanging = tasks.keep(asyncio.create_task(asyncio.sleep(30)))
    await asyncio.sleep(0)  # both begin: one fails at once, one hangs

    await tasks.cancel()

    assert hanging.cancelled()
    assert isinstance(failing.exception(), ValueError)
