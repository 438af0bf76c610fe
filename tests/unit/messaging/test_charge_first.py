"""A request record's delivery is charged when it is taken: a large one's commit lands
before it runs, a small one's runs beside it (`CHARGE_FIRST_BYTES`), so the commit (6-12 ms
on Kafka 4) is not in a 1-URL request's path."""

from __future__ import annotations

import asyncio

from aiokafka import ConsumerRecord, TopicPartition
from inmemory import FakeKafkaConsumer
from prometheus_client import CollectorRegistry
from record_handlers import FunctionHandler

from service.messaging.consumer import CHARGE_FIRST_BYTES, RecordConsumer
from service.metrics import Metrics
from service.settings import Settings
from service.worker.consumers import requests_spec

SETTINGS = Settings(worker_name="unit")
TP = TopicPartition(SETTINGS.requests_topic, 0)


def _record(offset: int, size: int) -> ConsumerRecord[bytes, bytes]:
    value = b"x" * size
    return ConsumerRecord(TP.topic, TP.partition, offset, 0, 0, None, value, None, 0, size, [])


async def _taken(size: int) -> tuple[bool, list[dict[TopicPartition, tuple[int, str]]]]:
    """Take one record of `size` bytes while the broker holds every commit: whether its
    handler started before the commit was answered, and the commits asked for."""
    started = asyncio.Event()

    async def handler(*_args: object) -> None:
        started.set()

    metrics = Metrics(CollectorRegistry())
    inner = FakeKafkaConsumer()
    spec = requests_spec(SETTINGS, metrics)
    consumer = RecordConsumer(
        SETTINGS, lambda _: FunctionHandler(handler), metrics, spec=spec, client=inner.factory
    )
    answer = asyncio.Event()
    asked: list[dict[TopicPartition, tuple[int, str]]] = []

    async def commit(offsets: dict[TopicPartition, tuple[int, str]]) -> None:
        asked.append(offsets)
        await answer.wait()

    inner.commit_hook = commit
    take = asyncio.create_task(consumer._take({TP: [_record(5, size)]}))  # noqa: SLF001
    async with asyncio.timeout(5):
        while not asked:
            await asyncio.sleep(0.01)
    for _ in range(10):  # the handler's task, if created, has run by then
        await asyncio.sleep(0)
    before = started.is_set()
    answer.set()
    async with asyncio.timeout(5):
        await take
        await started.wait()
    return before, asked


async def test_a_small_request_runs_beside_its_charge():
    before, asked = await _taken(CHARGE_FIRST_BYTES - 1)
    assert before
    [offsets] = asked
    assert offsets[TP][0] == 5  # the charge: position stays at the record, with its count


async def test_a_large_request_runs_only_once_its_charge_is_committed():
    before, asked = await _taken(CHARGE_FIRST_BYTES)
    assert not before
    [offsets] = asked
    assert offsets[TP][0] == 5


async def test_a_relief_sent_while_the_charge_is_in_flight_goes_after_it():
    """Commits go one at a time, each with the state when it is sent: the relief waits for
    the charge beside it, so the charge can never land last (before, a charge retried after
    a coordinator error overwrote the relief, and three deaths made an innocent request
    `poison`)."""

    async def handler(*_args: object) -> None:
        return None

    metrics = Metrics(CollectorRegistry())
    inner = FakeKafkaConsumer()
    spec = requests_spec(SETTINGS, metrics)
    consumer = RecordConsumer(
        SETTINGS, lambda _: FunctionHandler(handler), metrics, spec=spec, client=inner.factory
    )
    answers = [asyncio.Event(), asyncio.Event()]
    asked: list[dict[TopicPartition, tuple[int, str]]] = []

    async def commit(offsets: dict[TopicPartition, tuple[int, str]]) -> None:
        asked.append(offsets)
        await answers[len(asked) - 1].wait()

    inner.commit_hook = commit
    record = _record(5, 100)
    await consumer._take({TP: [record]})  # noqa: SLF001  # the charge, in flight
    relief = asyncio.create_task(consumer.relieved(record))
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(asked) == 1  # the relief waits
    answers[0].set()
    answers[1].set()
    async with asyncio.timeout(5):
        await relief
    charge, relieved = asked
    assert charge[TP] != relieved[TP]
    assert consumer._tracker.to_commit({TP}) == {}  # noqa: SLF001  # the last one sent is current
