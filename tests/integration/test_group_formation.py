"""Workers started at the same moment form their group at once (issue 18)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from harness import GROUP_DEADLINE_S, Topics, WorkerProcess, wait_for_group, wait_for_leaders
from waiting import until

from service.messaging.topics import ensure_topics
from service.settings import Settings

if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_PARTITIONS = Settings.model_fields["requests_partitions"].default


def _holds_both(worker: WorkerProcess) -> bool:
    """The worker's latest assignments give it request and page partitions."""
    latest = {
        entry["consumer"]: entry["partitions"]
        for entry in worker.events()
        if entry.get("event") == "consumer.assigned"
    }
    return bool(latest.get("request")) and bool(latest.get("page"))


async def test_three_workers_started_together_hold_every_partition(kafka: str, tmp_path: Path):
    """Three workers started at the same moment on new groups, with the default partition
    count, all hold request and page partitions, and each group got there in at most one
    rebalance per worker: each worker's join is one JoinGroup (with two assignors offered,
    aiokafka sent one per assignor, and each second one started another rebalance: seen as
    generation 4 at best, and as minutes without an assignment at worst)."""
    partitions = str(DEFAULT_PARTITIONS)
    topics = Topics(
        bootstrap=kafka,
        extra_env={
            "CRAWL_REQUESTS_PARTITIONS": partitions,
            "CRAWL_OUTPUT_PARTITIONS": partitions,
            "CRAWL_PAGE_PARTITIONS": partitions,
        },
    )
    await ensure_topics(
        topics.settings(
            requests_partitions=DEFAULT_PARTITIONS,
            output_partitions=DEFAULT_PARTITIONS,
            page_partitions=DEFAULT_PARTITIONS,
        )
    )
    await wait_for_leaders(topics, partitions=DEFAULT_PARTITIONS)
    workers = [WorkerProcess(topics.env(), tmp_path / f"w{n}.log", f"w{n}") for n in range(3)]
    try:
        await asyncio.gather(*(worker.start() for worker in workers))
        await wait_for_group(topics, members=3)
        # The broker's group is stable once the assignments are handed out; each worker logs
        # its own after it has read its committed offsets.
        await until(lambda: all(_holds_both(worker) for worker in workers), GROUP_DEADLINE_S, 0.2)
        generations = [
            entry["generation"]
            for worker in workers
            for entry in worker.events()
            if entry.get("event") == "consumer.assigned"
        ]
        assert generations
        assert max(generations) <= len(workers), generations
    finally:
        await asyncio.gather(*(worker.close() for worker in workers))
