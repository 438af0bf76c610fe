"""`RecordConsumer(full=...)`: a partition the handler calls full (a fetcher with a slot's
worth of its pages waiting) is not read, while the others are; before, the first partition
aiokafka drained could fill the whole page backlog with one host's pages, which its limit
kept from the free slots."""

from __future__ import annotations

from aiokafka import TopicPartition
from prometheus_client import CollectorRegistry

from service.messaging.consumer import ConsumerSpec, RecordConsumer
from service.metrics import Metrics
from service.settings import Settings

SETTINGS = Settings(worker_name="unit")
PARTS = [TopicPartition(SETTINGS.pages_topic, p) for p in range(3)]


async def _never(*_args: object) -> None:
    raise AssertionError("no record is handled here")


async def test_only_the_full_partition_is_held():
    full = {1}
    metrics = Metrics(CollectorRegistry())
    consumer = RecordConsumer(
        SETTINGS,
        _never,
        metrics,
        spec=ConsumerSpec.pages(SETTINGS, metrics),
        full=lambda partition: partition in full,
    )
    inner = consumer._consumer  # noqa: SLF001
    inner.assignment = lambda: set(PARTS)  # type: ignore[method-assign]
    paused: set[TopicPartition] = set()
    inner.paused = lambda: set(paused)  # type: ignore[method-assign]
    inner.pause = paused.update  # type: ignore[assignment]
    inner.resume = lambda *tps: paused.difference_update(tps)  # type: ignore[assignment]

    assert consumer._apply_backpressure(room=10) == {PARTS[1]}  # noqa: SLF001
    full.clear()
    assert consumer._apply_backpressure(room=10) == set()  # noqa: SLF001
    await inner.stop()  # never started; closes its client
