"""Records aiokafka hands out that the consumer does not take are read again, never skipped.

aiokafka hands out a new assignment's records as soon as it knows their committed offsets,
while the rebalance listener (`on_assigned`) still restores this consumer's own offsets; and
a poll made while every partition was to stay paused returns the records of a new
assignment's partitions, which are not paused yet. Either way its position has moved past
them. The failover benchmark lost 10-16 pages and 16-20 requests per run that way (a
fetcher then read nothing more of partitions with records waiting, until the next
rebalance): each such batch is now rewound to where this consumer stands in the partition.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from aiokafka import ConsumerRecord, TopicPartition
from inmemory import FakeKafkaConsumer
from prometheus_client import CollectorRegistry
from record_handlers import FunctionHandler
from waiting import until

from service.messaging.consumer import RecordConsumer
from service.metrics import Metrics
from service.settings import Settings
from service.worker.consumers import requests_spec

if TYPE_CHECKING:
    from service.messaging.offsets import Delivery

SETTINGS = Settings(worker_name="unit")
TP = TopicPartition(SETTINGS.requests_topic, 0)
OFFSETS = list(range(5))


def _record(offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(TP.topic, TP.partition, offset, 0, 0, None, b"{}", None, 0, 2, [])


def _consumer(
    fake: FakeKafkaConsumer, handled: list[int], *, room: list[int] | None = None
) -> RecordConsumer[FunctionHandler]:
    async def handle(record: ConsumerRecord[bytes, bytes], _: Delivery, owned: asyncio.Event):
        await owned.wait()  # as a page's result waits for its partition's ownership
        handled.append(record.offset)

    metrics = Metrics(CollectorRegistry())
    return RecordConsumer(
        SETTINGS,
        lambda _: FunctionHandler(handle),
        metrics,
        spec=requests_spec(SETTINGS, metrics),
        intake_room=None if room is None else lambda: room[0],
        client=fake.factory,
    )


async def test_records_handed_out_while_an_assignment_is_applied_are_read_again():
    fake = FakeKafkaConsumer({TP})
    fake.log[TP] = [_record(offset) for offset in OFFSETS]
    fake.coordinator.committed[TP] = 0
    handled: list[int] = []
    consumer = _consumer(fake, handled)
    await consumer.on_revoked({TP})
    fake.coordinator.answering.clear()  # the listener waits for the committed offsets
    assigning = asyncio.create_task(consumer.on_assigned({TP}))
    await asyncio.wait_for(fake.coordinator.asked.wait(), 5)
    polling = asyncio.create_task(consumer._loop())  # noqa: SLF001
    try:
        await until(lambda: len(fake.handed_out) == len(OFFSETS))  # handed out meanwhile
        fake.coordinator.answering.set()
        await asyncio.wait_for(assigning, 5)
        await until(lambda: sorted(handled) == OFFSETS)
    finally:
        consumer.stop()
        await asyncio.wait_for(polling, 5)
    assert sorted(handled) == OFFSETS  # each once


async def test_a_poll_while_all_is_paused_loses_none_of_a_new_assignments_records():
    fake = FakeKafkaConsumer({TP})
    fake.log[TP] = [_record(offset) for offset in OFFSETS]
    handled: list[int] = []
    room = [0]  # the backlog is full: every partition is held, then paused in the client
    consumer = _consumer(fake, handled, room=room)
    polling = asyncio.create_task(consumer._loop())  # noqa: SLF001
    try:
        await until(lambda: TP in fake.held, deadline_s=10)  # after `HOLD_S`

        def rebalanced() -> None:  # lands during a poll: the new partitions are not paused
            fake.held.clear()
            fake.during_poll = None

        fake.during_poll = rebalanced
        await until(lambda: len(fake.handed_out) == len(OFFSETS))  # the poll got them
        room[0] = 10
        await until(lambda: sorted(handled) == OFFSETS)
    finally:
        consumer.stop()
        await asyncio.wait_for(polling, 5)
    assert sorted(handled) == OFFSETS


async def test_a_stop_is_not_held_up_by_an_assignment_that_never_ends_applying():
    """The broker gone while a rebalance listener waits on it: a batch handed out meanwhile
    does not keep the consumer from stopping (it is left unread, for the next owner)."""
    fake = FakeKafkaConsumer({TP})
    fake.log[TP] = [_record(offset) for offset in OFFSETS]
    handled: list[int] = []
    consumer = _consumer(fake, handled)
    fake.coordinator.answering.clear()  # never answers
    assigning = asyncio.create_task(consumer.on_assigned({TP}))
    await asyncio.wait_for(fake.coordinator.asked.wait(), 5)
    polling = asyncio.create_task(consumer._loop())  # noqa: SLF001
    try:
        await until(lambda: len(fake.handed_out) == len(OFFSETS))
        consumer.stop()
        await asyncio.wait_for(polling, 5)
    finally:
        assigning.cancel()
    assert handled == []


async def test_a_stop_is_not_held_up_by_a_poll_waiting_for_a_rebalance_to_end():
    """The broker gone during a rebalance: aiokafka's poll waits for the assignment without
    its timeout, and the assignment never comes. A stop still ends the loop (a clean-clone
    run's worker did not exit within 90 s of SIGTERM)."""
    fake = FakeKafkaConsumer({TP})
    fake.log[TP] = [_record(offset) for offset in OFFSETS]
    handled: list[int] = []
    consumer = _consumer(fake, handled)
    fake.rebalanced.clear()  # never ends
    polling = asyncio.create_task(consumer._loop())  # noqa: SLF001
    await until(lambda: len(fake.polls) == 1)
    consumer.stop()
    await asyncio.wait_for(polling, 5)
    assert fake.handed_out == []
    assert handled == []
