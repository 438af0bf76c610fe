"""Consumer lag per owned partition, for the metrics (as KEDA and lag exporters compute it)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaError

from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Iterable

    from aiokafka import AIOKafkaConsumer, TopicPartition
    from prometheus_client import Gauge

    from service.messaging.offsets import OffsetTracker

log = get_logger(__name__)


async def update_lag(
    consumer: AIOKafkaConsumer, tracker: OffsetTracker, gauge: Gauge, call_s: float
) -> None:
    """End offset minus committed offset of each partition `consumer` owns (each offsets
    lookup within `call_s`)."""
    owned = consumer.assignment()
    if not owned:
        return
    try:
        ends = await asyncio.wait_for(consumer.end_offsets(list(owned)), call_s)
        starts = await asyncio.wait_for(consumer.beginning_offsets(list(owned)), call_s)
    except (KafkaError, TimeoutError) as exc:
        log.debug("consumer.lag_unavailable", error=repr(exc))
        return
    for tp in owned & ends.keys():
        committed = tracker.committed_position(tp)
        base = committed if committed is not None else starts.get(tp, 0)
        gauge.labels(str(tp.partition)).set(max(ends[tp] - base, 0))


def forget_lag(gauge: Gauge, partitions: Iterable[TopicPartition]) -> None:
    """Drop the lag of partitions no longer owned."""
    for tp in partitions:
        with contextlib.suppress(KeyError):
            gauge.remove(str(tp.partition))
