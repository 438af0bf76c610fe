"""A result reader whose read fails is replaced, and the pool says it is not whole meanwhile
(fake consumers: the replacement logic only; the real readers are in the integration tests)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from waiting import until

from service.errors import BrokerUnavailableError
from service.gateway.errors import ApiError
from service.gateway.paging import Cursor
from service.gateway.results import ResultReader
from service.settings import Settings


class FakeConsumer:
    """Starts when told to; its reads end at offset 0 (an empty partition) or fail."""

    def __init__(self, *, broken: bool = False, starts: asyncio.Event | None = None) -> None:
        self.broken = broken
        self.starts = starts
        self.stopped = False

    async def start(self) -> None:
        if self.starts is not None:
            await self.starts.wait()

    async def stop(self) -> None:
        self.stopped = True

    def assign(self, _: Any) -> None:
        return

    def seek(self, *_: Any) -> None:
        return

    async def end_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        if self.broken:
            raise RuntimeError("Unexpected error in fetcher routine")
        return dict.fromkeys(partitions, 0)

    async def position(self, _: Any) -> int:
        return 0


def pool(*consumers: FakeConsumer, on_failure: Any = None) -> ResultReader:
    made = iter(consumers)
    return ResultReader(Settings(), readers=1, new=lambda: next(made), on_failure=on_failure)  # type: ignore[arg-type,return-value]


async def test_a_failed_read_replaces_its_reader_and_the_pool_is_not_live_meanwhile():
    starts = asyncio.Event()
    broken, fresh = FakeConsumer(broken=True), FakeConsumer(starts=starts)
    failures: list[None] = []
    async with pool(broken, fresh, on_failure=lambda: failures.append(None)) as reader:
        with pytest.raises(BrokerUnavailableError):
            await reader.page("job", 0, Cursor(offset=0))
        assert len(failures) == 1
        await until(lambda: broken.stopped)
        assert not reader.live  # the replacement has not started yet
        starts.set()
        await until(lambda: reader.live)
        page = await reader.page("job", 0, Cursor(offset=0))
    assert page.results == ()
    assert page.at_end


async def test_a_cursor_outside_the_results_is_a_400_and_keeps_its_reader():
    consumer = FakeConsumer()
    async with pool(consumer) as reader:
        with pytest.raises(ApiError) as raised:
            await reader.page("job", 0, Cursor(offset=5))
        assert raised.value.status == 400
        assert reader.live
        assert not consumer.stopped
