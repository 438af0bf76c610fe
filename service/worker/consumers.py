"""What the worker's two consumers read and how far: the coordinators' requests consumer
and the fetchers' pages consumer (the policy `messaging.consumer.ConsumerSpec` carries)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.messaging.consumer_spec import ConsumerSpec

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from aiokafka import TopicPartition

    from service.metrics import Metrics
    from service.settings import Settings


def requests_spec(
    settings: Settings,
    metrics: Metrics,
    on_assigned: Callable[[set[TopicPartition]], Awaitable[None]] | None = None,
) -> ConsumerSpec:
    return ConsumerSpec(
        topic=settings.requests_topic,
        group_id=settings.group_id,
        name="request",
        max_in_flight=settings.max_requests_in_flight,
        run_ahead=settings.max_partition_run_ahead,
        lag=metrics.consumer_lag,
        in_flight=metrics.requests_in_flight,
        paused=metrics.paused,
        pauses=metrics.pauses,
        rebalances=metrics.rebalances,
        skipped=metrics.records_skipped,
        on_assigned=on_assigned,
    )


def pages_spec(settings: Settings, metrics: Metrics) -> ConsumerSpec:
    return ConsumerSpec(
        topic=settings.pages_topic,
        group_id=settings.fetcher_group_id,
        name="page",
        # queued, rendering, and as many again publishing their results
        max_in_flight=settings.max_queued_pages + 2 * settings.max_page_slots,
        # A partition is a host (or a few): one hot host is the usual case, and its
        # backlog is bounded by the memory gate (`CRAWL_MAX_QUEUED_PAGES`), not by a
        # run-ahead shorter than that backlog.
        run_ahead=settings.max_queued_pages + 2 * settings.max_page_slots,
        lag=metrics.page_consumer_lag,
        in_flight=metrics.page_records_in_flight,
        paused=metrics.page_partitions_paused,
        pauses=metrics.page_pauses,
        rebalances=metrics.page_rebalances,
        skipped=metrics.page_records_skipped,
        charge_on_delivery=False,
        held=metrics.page_partitions_held,
    )
