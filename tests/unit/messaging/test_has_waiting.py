"""`RecordConsumer.has_waiting`: whether records of a partition are on the topic and not
yet taken here, by the last fetch's high watermark. The local lane defers to them, so a
coordinator's own tasks never go before another coordinator's tasks for the same hosts."""

from __future__ import annotations

from aiokafka import TopicPartition
from inmemory import FakeKafkaConsumer
from prometheus_client import CollectorRegistry
from record_handlers import FunctionHandler, never

from service.messaging.consumer import RecordConsumer
from service.metrics import Metrics
from service.settings import Settings
from service.worker.consumers import pages_spec


async def _consumer(highwater: dict[int, int | None]) -> RecordConsumer:
    settings = Settings(worker_name="unit")
    metrics = Metrics(CollectorRegistry())
    inner = FakeKafkaConsumer()
    inner.watermarks = highwater
    spec = pages_spec(settings, metrics)
    return RecordConsumer(
        settings, lambda _: FunctionHandler(never), metrics, spec=spec, client=inner.factory
    )


async def test_records_beyond_what_was_taken_are_waiting():
    consumer = await _consumer({0: 5, 1: 3, 2: None})
    tracker = consumer._tracker  # noqa: SLF001
    topic = Settings(worker_name="unit").pages_topic
    for offset in range(3):
        tracker.delivered(TopicPartition(topic, 1), offset, charge=False)

    assert consumer.has_waiting(0)  # nothing taken, five on the topic
    assert not consumer.has_waiting(1)  # all three taken
    assert not consumer.has_waiting(2)  # never fetched: nothing known to wait
    tracker.delivered(TopicPartition(topic, 0), 0, charge=False)
    assert consumer.has_waiting(0)
