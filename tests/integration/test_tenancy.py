"""Tenants and deployments on one cluster: one tenant's pages, one deployment's workers or
one forged record reach no other's results."""

from __future__ import annotations

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from harness import Topics, WorkerProcess

pytestmark = pytest.mark.integration

START_DEADLINE_S = 90.0


async def _partitions(bootstrap: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        [described] = await admin.describe_topics([topic])
        return len(described["partitions"])
    finally:
        await admin.close()


async def test_a_worker_creates_the_frontier_topic_with_the_requests_topics_partitions(
    kafka, tmp_path
):
    """A requests topic made by hand with 1 partition: the worker creates the frontier topic
    with 1 partition too (not `CRAWL_REQUESTS_PARTITIONS`) and starts."""
    topics = Topics(bootstrap=kafka)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topics.requests, 1, 1)])
    finally:
        await admin.close()
    worker = WorkerProcess(
        topics.env(CRAWL_ROLE="coordinator"), tmp_path / "w.log", "w", command=("worker",)
    )
    try:
        await worker.start()
    finally:
        await worker.close()
    assert await _partitions(kafka, topics.frontier) == 1
