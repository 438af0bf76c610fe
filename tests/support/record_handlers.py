"""A `RecordConsumer`'s handler made of a function, for tests of the consumer alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable

    from aiokafka import ConsumerRecord

    from service.messaging.offsets import Delivery


class FunctionHandler:
    """Hands each record to `handle`; the partitions `full` names are full."""

    def __init__(
        self,
        handle: Callable[..., Awaitable[None]],
        full: Callable[[int], bool] = lambda _: False,
    ) -> None:
        self._handle = handle
        self._full = full

    async def handle(
        self, record: ConsumerRecord[bytes, bytes], delivery: Delivery, owned: asyncio.Event
    ) -> None:
        await self._handle(record, delivery, owned)

    def full(self, partition: int) -> bool:
        return self._full(partition)


async def never(*_args: object) -> None:
    raise AssertionError("no record is handled here")
