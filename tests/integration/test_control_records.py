"""Bad control records on the real broker: naive, far-future, malformed and huge records in
the compacted control topic never stop a worker from starting or cancels from applying; a
request with a naive `expires_at` is rejected (not an `internal` crash). The worker is a real
`crawlstream worker` process with default settings."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer
from harness import produce, read_topic
from ports import unused_port
from prometheus_client.parser import text_string_to_metric_families

from service.client import CrawlClient
from service.contracts import CancelControl, CrawlRequest, EventType, dump
from service.messaging.dead_letter import ERROR_CODE, ERROR_MESSAGE

pytestmark = pytest.mark.integration

GOOD_CANCELS = 200
"""Valid cancels of other request_ids written before the worker starts."""

BAD_CONTROL_RECORDS: list[tuple[bytes, bytes, str]] = [
    (
        b"naive",
        b'{"schema_version":1,"type":"cancel","request_id":"naive","at":"2026-12-01T08:00:00"}',
        "invalid",
    ),
    (
        b"far",
        b'{"schema_version":1,"type":"cancel","request_id":"far","at":"9999-12-31T23:59:59Z"}',
        "invalid",
    ),
    (b"malformed", b'{"type": "cancel", "request_id": ', "not_json"),
    (b"nested", b"[" * 10_000, "not_json"),
    (b"huge", b'{"reason": "' + b"x" * 999_000 + b'"}', "too_large"),
    (b"pause", b'{"type": "pause", "request_id": "pause"}', "unknown_type"),
]
"""(key, value, skip reason): each kind of bad record; the huge one is as large as the
control topic takes (its max.message.bytes is CRAWL_MAX_MESSAGE_BYTES + 4096). A keyless
record is not here: a compacted topic refuses it (its skip is unit-tested)."""

SLOW_MS = 2000
READY_DEADLINE_S = 90.0
HTTP_DEADLINE_S = 5.0


def _free_port() -> int:
    return unused_port()


async def _produce_control(topics, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=topics.bootstrap, acks="all", max_request_size=2_000_000
    )
    await producer.start()
    try:
        for key, value in records:
            await asyncio.wait_for(producer.send_and_wait(topics.control, value, key=key), 60)
    finally:
        await producer.stop()


async def _get(port: int, path: str) -> tuple[int, str]:
    timeout = aiohttp.ClientTimeout(total=HTTP_DEADLINE_S)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def _wait_ready(port: int) -> None:
    async with asyncio.timeout(READY_DEADLINE_S):
        while True:
            try:
                if (await _get(port, "/readyz"))[0] == 200:
                    return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)


async def _skipped(port: int) -> dict[str, float]:
    """`crawl_control_records_skipped_total` by reason, scraped from the worker."""
    _, text = await _get(port, "/metrics")
    return {
        sample.labels["reason"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "crawl_control_records_skipped_total"
    }


async def test_bad_control_records_are_skipped_and_cancels_keep_working(
    topics, collector, site, start_worker
):
    """Naive, far-future, malformed, deeply nested, 1 MB and unknown-type records
    plus 200 valid cancels in the control topic: the worker starts and becomes ready, counts
    each bad record under its reason, logs one `control.ready` summary (no line per cancel),
    and a cancel produced afterwards stops a running 30-URL request."""
    good = [
        (f"old-{i}".encode(), dump(CancelControl(request_id=f"old-{i}")))
        for i in range(GOOD_CANCELS)
    ]
    await _produce_control(topics, [(k, v) for k, v, _ in BAD_CONTROL_RECORDS] + good)
    port = _free_port()
    worker = await start_worker("reader", CRAWL_METRICS_PORT=str(port))
    await _wait_ready(port)

    [ready] = [e for e in worker.events() if e.get("event") == "control.ready"]
    assert (ready["applied"], ready["skipped"]) == (GOOD_CANCELS, len(BAD_CONTROL_RECORDS))
    assert not [e for e in worker.events() if e.get("event") == "control.cancel"]
    warned = [e for e in worker.events() if e.get("event") == "control.skipped"]
    assert sorted(e["reason"] for e in warned) == sorted(r for _, _, r in BAD_CONTROL_RECORDS)
    skipped = await _skipped(port)
    for reason in {r for _, _, r in BAD_CONTROL_RECORDS}:
        expected = sum(r == reason for _, _, r in BAD_CONTROL_RECORDS)
        assert skipped[reason] == expected, reason

    await _a_cancel_stops_a_running_request(topics, collector, site, "ctl")


async def test_bad_control_records_produced_while_running_leave_cancels_working(
    topics, collector, site, start_worker
):
    """The same bad records produced to a running worker's control topic: each is logged as
    skipped (the reader read past them), and a cancel after them stops a running request."""
    worker = await start_worker()
    await _produce_control(topics, [(k, v) for k, v, _ in BAD_CONTROL_RECORDS])
    async with asyncio.timeout(60):
        while len([e for e in worker.events() if e.get("event") == "control.skipped"]) < len(
            BAD_CONTROL_RECORDS
        ):
            await asyncio.sleep(0.2)
    await _a_cancel_stops_a_running_request(topics, collector, site, "live")


async def _a_cancel_stops_a_running_request(topics, collector, site, request_id: str) -> None:
    """A 30-URL request of slow pages, cancelled after its first result, ends `cancelled`."""
    urls = [site.url(f"/slow/{request_id}-{i}?ms={SLOW_MS}") for i in range(30)]
    request = CrawlRequest(request_id=request_id, urls=urls)
    await produce(topics, [(request_id.encode(), dump(request))])
    await collector.wait_until(lambda seen: len(seen.results_of(request_id)) >= 1, deadline_s=180)
    async with CrawlClient(topics.settings()) as client:
        await client.cancel(request_id, "after the bad records")
    await collector.wait_until(lambda seen: seen.terminal(request_id), deadline_s=60)
    [terminal] = collector.seen.terminal(request_id)
    assert terminal.type == EventType.CANCELLED
    assert terminal.detail == "cancelled: after the bad records"
    assert terminal.cancelled > 0


async def test_a_request_with_a_naive_expires_at_is_rejected_with_a_reason(
    topics, collector, site, start_worker
):
    """`expires_at` without a time zone: a `rejected` event and an `invalid_request` dead
    letter that names the field and says to add an offset; never an `internal` crash. A
    request with an aware `expires_at` after it on the worker completes."""
    await start_worker()
    naive = json.dumps(
        {
            "request_id": "naive-exp",
            "urls": [site.url("/page/1")],
            "expires_at": "2030-01-01T00:00:00",
        }
    ).encode()
    aware = json.dumps(
        {
            "request_id": "aware-exp",
            "urls": [site.url("/page/2")],
            "expires_at": "2030-01-01T00:00:00+01:00",
        }
    ).encode()
    await produce(topics, [(b"naive-exp", naive), (b"aware-exp", aware)])
    await collector.wait_until(
        lambda seen: seen.terminal("naive-exp") and seen.terminal("aware-exp"), deadline_s=120
    )
    [rejected] = collector.seen.terminal("naive-exp")
    assert rejected.type == EventType.REJECTED
    assert rejected.detail is not None
    assert rejected.detail.startswith("invalid_request: expires_at: ")
    assert "has no time zone" in rejected.detail
    assert not collector.seen.results_of("naive-exp")
    [completed] = collector.seen.terminal("aware-exp")
    assert completed.type == EventType.COMPLETED

    [letter] = await read_topic(topics.bootstrap, topics.dead_letter, 1, 60)
    headers = {name: raw.decode() for name, raw in letter.headers}
    assert letter.key == b"naive-exp"
    assert letter.value == naive
    assert headers[ERROR_CODE] == "invalid_request"
    assert "has no time zone" in headers[ERROR_MESSAGE]
