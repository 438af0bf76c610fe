"""A partition the handler calls full (`RecordHandler.full`: a fetcher with a slot's
worth of its pages waiting) is not read, while the others are; before, the first partition
aiokafka drained could fill the whole page backlog with one host's pages, which its limit
kept from the free slots."""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import TopicPartition
from inmemory import FakeKafkaConsumer
from prometheus_client import CollectorRegistry
from record_handlers import FunctionHandler, never

from service.messaging.consumer import RecordConsumer
from service.metrics import Metrics
from service.settings import Settings
from service.worker.consumers import pages_spec

SETTINGS = Settings(worker_name="unit")
PARTS = [TopicPartition(SETTINGS.pages_topic, p) for p in range(3)]


async def test_only_the_full_partition_is_held():
    full = {1}
    metrics = Metrics(CollectorRegistry())
    consumer = RecordConsumer(
        SETTINGS,
        lambda _: FunctionHandler(never, full=lambda partition: partition in full),
        metrics,
        spec=pages_spec(SETTINGS, metrics),
        client=FakeKafkaConsumer(PARTS).factory,
    )

    assert consumer._apply_backpressure(room=10) == {PARTS[1]}  # noqa: SLF001
    full.clear()
    assert consumer._apply_backpressure(room=10) == set()  # noqa: SLF001


async def test_records_set_aside_leave_room_up_to_the_paced_bound():
    """Records waiting for their host's pace count against `CRAWL_MAX_PACED_PAGES`, not
    against the records in flight; beyond that bound they count again."""
    settings = Settings(worker_name="unit", max_paced_pages=2)  # type: ignore[arg-type]
    metrics = Metrics(CollectorRegistry())
    spec = pages_spec(settings, metrics)
    consumer = RecordConsumer(
        settings,
        lambda _: FunctionHandler(never),
        metrics,
        spec=spec,
        client=FakeKafkaConsumer().factory,
    )
    busy = {PARTS[0]: {object() for _ in range(spec.max_in_flight)}}
    consumer._tasks = busy  # type: ignore[assignment]  # noqa: SLF001
    assert consumer._fetch_room() == 0  # noqa: SLF001
    records = [_Record(PARTS[0].topic, 0, offset) for offset in range(3)]
    consumer.set_aside(records[0])  # type: ignore[arg-type]
    consumer.set_aside(records[1])  # type: ignore[arg-type]
    assert consumer._fetch_room() == 2  # noqa: SLF001
    consumer.set_aside(records[2])  # type: ignore[arg-type]
    assert consumer._fetch_room() == 2  # noqa: SLF001  # the third counts as in flight
    for record in records:
        consumer.taken_back(record)  # type: ignore[arg-type]
    assert consumer._fetch_room() == 0  # noqa: SLF001


@dataclass(frozen=True)
class _Record:
    topic: str
    partition: int
    offset: int
