"""`stop_consumer`: a cancel escaping aiokafka's stop ends the stop, not the shutdown; a
cancel of the stopping task itself still propagates."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from structlog.testing import capture_logs

from service.messaging.closing import stop_consumer

DEADLINE_S = 5.0


class Client:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


class EscapingStop:
    """Stops as aiokafka's consumer does when a fetch waits out its retry backoff: it
    cancels that fetch, awaits it, and the fetch's cancel escapes before the client closes."""

    def __init__(self) -> None:
        self._client = Client()

    async def stop(self) -> None:
        fetch = asyncio.create_task(asyncio.sleep(60))
        await asyncio.sleep(0)
        fetch.cancel()
        await fetch
        await self._client.close()


class SwallowingStop:
    """A stop that takes its cancel for one more failed attempt and goes on (as aiokafka's
    offset lookups do with the broker gone: they answer a cancel with their own timeout)."""

    def __init__(self) -> None:
        self._client = Client()
        self.released = asyncio.Event()

    async def stop(self) -> None:
        while not self.released.is_set():
            try:
                await self.released.wait()
            except asyncio.CancelledError:
                continue


class HangingStop:
    def __init__(self) -> None:
        self.stopping = asyncio.Event()

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.sleep(60)


async def test_a_cancel_escaping_the_consumers_stop_is_logged_and_its_client_closed():
    """The escaped cancel of an inner fetch returns from `stop_consumer`, which closes the
    client the interrupted stop left open and logs `consumer.stop_interrupted`."""
    consumer = EscapingStop()
    with capture_logs() as logs:
        await stop_consumer(cast("Any", consumer), DEADLINE_S)
    assert consumer._client.closed  # noqa: SLF001
    assert [entry["event"] for entry in logs] == ["consumer.stop_interrupted"]


async def test_a_cancel_of_the_stopping_task_propagates():
    """A task cancelled while it stops a consumer ends cancelled (a shutdown's own deadline
    or a caller's cancel is not swallowed)."""
    consumer = HangingStop()
    stopping = asyncio.create_task(stop_consumer(cast("Any", consumer), DEADLINE_S))
    await consumer.stopping.wait()
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert stopping.cancelled()


async def test_a_stop_that_swallows_its_cancel_ends_at_the_deadline_with_the_client_closed():
    """A stop still running at the deadline is cancelled and left; its client is closed and
    `consumer.stop_late` logged (the old `wait_for` waited for that cancel forever). A
    deadline of a fraction of a second: the test waits it out."""
    consumer = SwallowingStop()
    with capture_logs() as logs:
        stopping = asyncio.create_task(stop_consumer(cast("Any", consumer), 0.2))
        try:
            done, _ = await asyncio.wait({stopping}, timeout=DEADLINE_S)
        finally:
            consumer.released.set()
            await stopping
    assert done
    assert consumer._client.closed  # noqa: SLF001
    assert [entry["event"] for entry in logs] == ["consumer.stop_late"]
