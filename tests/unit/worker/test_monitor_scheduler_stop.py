"""A worker whose broker went away still stops: the monitor scheduler's loop ends at close
also when a reading answered the cancel with its own timeout (as aiokafka's offset lookups
do while the broker is gone). Seen in CI: SIGTERM after the broker stopped, the worker
still running 90 s later."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict

from aiokafka.errors import KafkaTimeoutError

from service.settings import Settings
from service.worker.coordinator.monitors import MonitorScheduler

STOP_DEADLINE_S = 10.0


async def test_a_reading_that_swallows_its_cancel_does_not_keep_the_scheduler_running():
    counts: defaultdict[str, int] = defaultdict(lambda: 4)
    scheduler = MonitorScheduler(Settings(), None, lambda _: True, counts)  # type: ignore[arg-type]
    started = asyncio.Event()

    async def read() -> None:  # aiokafka's lookup: a cancel comes back as its timeout
        started.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.1)
        raise KafkaTimeoutError

    scheduler._read = read  # type: ignore[method-assign]  # noqa: SLF001
    scheduler._looking.start()  # noqa: SLF001
    await asyncio.wait_for(started.wait(), STOP_DEADLINE_S)
    await asyncio.wait_for(scheduler.__aexit__(None, None, None), STOP_DEADLINE_S)
