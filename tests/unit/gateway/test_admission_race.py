"""Two gateway replicas admit one tenant's jobs at its `max_concurrent_jobs`: a request whose
produce is slow (it lands after the other replica's hold) is not kept beside the other's.
The replicas' Kafka client and view reader are in-memory fakes over one shared "topic"; the
job views and the admission code are the real ones."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from service.client import Submission
from service.contracts import CrawlOptions, RecordSource
from service.gateway import service
from service.gateway.errors import ApiError
from service.gateway.jobs import JobMarker, JobView
from service.gateway.service import SETTLE_S, Gateway
from service.settings import Settings

if TYPE_CHECKING:
    from pathlib import Path

SLOW_PRODUCE_S = 2 * SETTLE_S
"""A produce held up by the broker: longer than the settle, as a stall would be."""


@dataclass
class Topic:
    """The requests topic both replicas write and read: (job id, marker) as they land."""

    landed: list[tuple[str, JobMarker]] = field(default_factory=list)


@dataclass
class FakeClient:
    """The replica's Kafka client: a produce lands on the topic after `delay_s`."""

    topic: Topic
    delay_s: float = 0.0
    cancelled: list[str] = field(default_factory=list)

    async def output_positions(self, request_id: str) -> dict[str, tuple[int, int]]:  # noqa: ARG002
        return defaultdict(lambda: (0, 0))

    async def submit(self, urls, options, *, request_id, metadata, crawl):  # noqa: ARG002
        await asyncio.sleep(self.delay_s)
        marker = JobMarker.model_validate(metadata["firecrawl"])
        self.topic.landed.append((request_id, marker))
        source = RecordSource(topic="requests", partition=0, offset=len(self.topic.landed))
        return Submission(request_id=request_id, source=source)

    async def cancel(self, request_id: str, reason: str | None = None) -> None:  # noqa: ARG002
        self.cancelled.append(request_id)


@dataclass
class FakeReader:
    """The replica's view reader: reading to the ends folds what has landed so far."""

    topic: Topic
    view: JobView

    async def caught_up_all(self) -> None:
        for job_id, marker in self.topic.landed:
            self.view.submitted(job_id, marker)


def replica(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, topic: Topic, delay_s: float
) -> tuple[Gateway, FakeClient]:
    """A gateway whose Kafka client, view reader and result reader are the fakes."""
    client = FakeClient(topic, delay_s)
    monkeypatch.setattr(service, "CrawlClient", lambda _settings: client)
    monkeypatch.setattr(
        service, "ViewReader", lambda _settings, view, _monitors=None: FakeReader(topic, view)
    )
    monkeypatch.setattr(service, "ResultReader", lambda _settings, on_failure: None)  # noqa: ARG005
    return Gateway(settings), client


async def started(gateway: Gateway) -> str | int:
    try:
        return await gateway.start("batch", ["https://a.test/"], CrawlOptions(), None, tenant="t")  # type: ignore[arg-type]
    except ApiError as exc:
        return exc.status


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {"keys": [{"key": "fc-key-of-the-test", "tenant": "t", "max_concurrent_jobs": 1}]}
        )
    )
    return Settings(gateway_keys_file=keys, gateway_secret="marker-key-of-the-test")  # noqa: S106


async def test_a_job_produced_after_another_replicas_hold_is_not_kept_beside_its_job(
    monkeypatch, settings
):
    """Replica 1 makes its job first, but its produce lands only after replica 2 made,
    produced and held a later one: replica 2, which never saw the first, keeps its own, and
    replica 1 gives way (429, cancelled), so one job runs for the tenant's limit of one."""
    topic = Topic()
    first, first_client = replica(monkeypatch, settings, topic, delay_s=SLOW_PRODUCE_S)
    second, _ = replica(monkeypatch, settings, topic, delay_s=0.0)
    slow = asyncio.create_task(started(first))
    await asyncio.sleep(SETTLE_S / 10)  # the first marker is made before the second's
    answers = [await started(second), await slow]
    kept = [a for a in answers if isinstance(a, str)]
    assert len(kept) == 1, answers
    assert answers[1] == 429
    [(cancelled_job, _)] = [(j, m) for j, m in topic.landed if j not in kept]
    assert first_client.cancelled == [cancelled_job]


async def test_two_jobs_made_at_once_keep_exactly_the_first_ranked(monkeypatch, settings):
    """Both produces are quick: each replica sees the other's job at its hold, and only the
    job ranked first (made first) is kept."""
    topic = Topic()
    first, _ = replica(monkeypatch, settings, topic, delay_s=0.0)
    second, _ = replica(monkeypatch, settings, topic, delay_s=0.0)
    answers = await asyncio.gather(started(first), started(second))
    kept = [a for a in answers if isinstance(a, str)]
    assert len(kept) == 1, answers
    ranked = sorted(topic.landed, key=lambda landed: (landed[1].created_at, landed[0]))
    assert kept == [ranked[0][0]]
