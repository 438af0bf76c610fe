"""A SIGTERM after the broker went away still ends the worker and the webhook dispatcher with
exit code 0: `docker compose down` stops the broker beside the services that depend on it
(they depend on the topics job, which depends on the broker), so a worker that drains may
find its broker gone."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from harness import Topics, WorkerProcess, running_broker
from waiting import until

from service.messaging.topics import ensure_topics

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration

FAILED_FETCH = "Failed fetch messages from"
"""aiokafka's log line of a fetch that found no broker (then it waits its retry backoff)."""
FAILED_DEADLINE_S = 60.0
EXIT_DEADLINE_S = 90.0
"""The worker's shutdown grace (the harness's 20 s) and the closes after it."""


def has_failed_fetch(process: WorkerProcess) -> bool:
    return any(str(entry.get("event", "")).startswith(FAILED_FETCH) for entry in process.events())


@pytest.mark.long_running
async def test_the_worker_and_the_dispatcher_exit_0_on_sigterm_after_the_broker_stopped(
    tmp_path: Path,
):
    """Both running on a broker that then stops; once their fetches fail, SIGTERM to both:
    each exits 0 (aiokafka's stop let a fetch's cancel escape; the processes exited 1)."""
    async with running_broker() as broker:
        topics = Topics(bootstrap=broker.bootstrap_servers)
        await ensure_topics(topics.settings())
        worker = WorkerProcess(topics.env(), tmp_path / "worker.log", "w1")
        dispatcher = WorkerProcess(
            topics.env(),
            tmp_path / "webhooks.log",
            "webhooks",
            command=("webhooks",),
            ready_event="webhooks.started",
        )
        processes = (worker, dispatcher)
        try:
            for process in processes:
                await process.start()
            await broker.stop()
            await until(
                lambda: all(map(has_failed_fetch, processes)), FAILED_DEADLINE_S, every_s=0.2
            )
            codes = await asyncio.gather(*(p.terminate(EXIT_DEADLINE_S) for p in processes))
            logs = {p.name: p.log_path.read_text(errors="replace")[-3000:] for p in processes}
            assert codes == [0, 0], logs
        finally:
            for process in processes:
                if process.process is not None:
                    await process.close()
