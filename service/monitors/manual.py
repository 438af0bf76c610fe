"""A check run by hand (`run_monitor` on the gateway, `crawlstream monitor run`): its
requests, each told where its results partition ends, produced through a crawl client."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from service.monitors.checks import check_requests
from service.monitors.ticks import manual_check_id
from service.sealing.marker_auth import marker_secret

if TYPE_CHECKING:
    from service.client import CrawlClient
    from service.contracts import CrawlRequest
    from service.contracts_monitors import MonitorRecord
    from service.settings import Settings


async def run_by_hand(
    client: CrawlClient, record: MonitorRecord, settings: Settings
) -> tuple[str, list[CrawlRequest]]:
    """Produce a manual check of `record`; returns its id and the requests produced."""
    results_topic, progress_topic = settings.results_topic, settings.progress_topic
    secret = marker_secret(settings)
    check = manual_check_id(record.id, uuid.uuid4().hex)
    results, progress = {}, {}
    for request in check_requests(
        record, check, trigger="manual", scheduled_for=None, secret=secret
    ):
        positions = await client.output_positions(request.request_id)
        results[request.request_id] = positions[results_topic][1]
        progress[request.request_id] = positions[progress_topic][1]
    requests = check_requests(
        record,
        check,
        trigger="manual",
        scheduled_for=None,
        results_offsets=results,
        progress_offsets=progress,
        secret=secret,
    )
    for request in requests:
        await client.submit(
            request.urls,
            request.options,
            request_id=request.request_id,
            metadata=request.metadata,
            crawl=request.crawl,
        )
    return check, requests
