"""The frontier log on a real broker: records larger than one message are written as chunks
and read back whole; a record whose writer died between its chunks is not read at all.

Real broker, no browser: `RunOutputs` writes as a deep crawl's owner does, `read_job` reads
as the next owner does on takeover.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from service.contracts import FrontierRecord, RecordSource, dump
from service.frontier.log import read_job
from service.messaging.publisher import JSON_HEADERS, Publisher
from service.worker.coordinator.outputs import Destinations, RunOutputs

pytestmark = pytest.mark.integration

SOURCE = RecordSource(topic="crawl.requests", partition=0, offset=7)

URL_PAD = "x" * 1_000
"""Makes each URL about 1 kB, as some sites' are: 3,000 of them are a 3 MB record."""


def _record(kind: str, links: tuple[str, ...], url: str | None = None) -> FrontierRecord:
    return FrontierRecord(
        request_id="split",
        source=SOURCE,
        kind=kind,  # type: ignore[arg-type]
        url=url,
        outcome="succeeded" if url else None,
        links=links,
        left_out=47_000 if kind == "sitemap" else 0,
    )


async def test_records_larger_than_a_message_are_read_back_whole(topics):
    """A 3 MB sitemap record (three times the 1 MB message limit: before, the owner's
    publish failed and the crawl was dead-lettered) and a page record after it come back
    from the log as written, in order; a chunk whose siblings were never written (its
    writer died) is dropped."""
    settings = topics.settings()
    since_ms = int(time.time() * 1000)
    sitemap = _record("sitemap", tuple(f"http://a.test/{n}?{URL_PAD}" for n in range(3_000)))
    page = _record("page", ("http://a.test/next",), url="http://a.test/0")
    torn = _record("page", tuple(f"http://a.test/t/{n}?{URL_PAD}" for n in range(2_000)), "/t")
    assert len(dump(sitemap)) > 3 * int(settings.max_message_bytes)
    async with Publisher(settings) as publisher:
        outputs = RunOutputs(
            publisher,
            Destinations.from_settings(settings),
            request_id="split",
            run_id="run-1",
            total=1,
            request_metadata={},
            source=SOURCE,
        )
        await outputs.frontier(sitemap)
        await outputs.frontier(page)
        await outputs.acknowledged()
        first, *_rest = publisher.messages(
            settings.frontier_topic, "split", dump(torn), JSON_HEADERS, chunk_id="dead:1"
        )
        delivery = await publisher.send(first)
        await asyncio.wait_for(delivery, publisher.timeout_s)
    assert _rest  # the torn record was more than one chunk: only its first was written

    records = await read_job(settings, "split", SOURCE, since_ms=since_ms)

    assert records == [sitemap, page]
