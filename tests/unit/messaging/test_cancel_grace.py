"""A rebalance cancels the work of partitions that moved and waits for it to end, at most
`CANCEL_GRACE_S`: work whose cleanup hangs is logged with where it waits and left to end on
its own, so the member goes on to consume its new partitions (a fetcher of the kill test
once logged nothing after a revocation and never read its next assignment)."""

from __future__ import annotations

import asyncio

from aiokafka import ConsumerRecord, TopicPartition
from inmemory import FakeKafkaConsumer
from prometheus_client import CollectorRegistry
from record_handlers import FunctionHandler
from structlog.testing import capture_logs

from service.messaging import consumer as consumer_module
from service.messaging.consumer import RecordConsumer
from service.metrics import Metrics
from service.settings import Settings
from service.worker.consumers import requests_spec

SETTINGS = Settings(worker_name="unit")
TP = TopicPartition(SETTINGS.requests_topic, 0)


def _record(offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(TP.topic, TP.partition, offset, 0, 0, None, b"{}", None, 0, 2, [])


async def test_work_that_hangs_when_cancelled_does_not_hold_the_rebalance(monkeypatch):
    # a grace of 0.2 s instead of 15 s: the unit test waits it out once
    monkeypatch.setattr(consumer_module, "CANCEL_GRACE_S", 0.2)
    started = asyncio.Event()
    released = asyncio.Event()

    async def stuck_in_cleanup(*_args: object) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await released.wait()  # a cleanup that never ends by itself

    metrics = Metrics(CollectorRegistry())
    consumer = RecordConsumer(
        SETTINGS,
        lambda _: FunctionHandler(stuck_in_cleanup),
        metrics,
        spec=requests_spec(SETTINGS, metrics),
        client=FakeKafkaConsumer().factory,
    )
    await consumer._take({TP: [_record(3)]})  # noqa: SLF001
    await asyncio.wait_for(started.wait(), 5)

    with capture_logs() as logs:
        async with asyncio.timeout(5):
            await consumer._cancel([TP])  # noqa: SLF001

    [slow] = [entry for entry in logs if entry["event"] == "consumer.cancel_slow"]
    assert slow["records"] == 1
    assert "stuck_in_cleanup" in slow["waiting_at"]
    released.set()
    done, _ = await asyncio.wait(consumer._ending, timeout=5)  # noqa: SLF001
    assert len(done) == 1
