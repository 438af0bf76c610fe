"""Records that used to stall a partition or retry forever, with default size settings."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from harness import read_topic

from service.contracts import CrawlRequest, EventType, dump

pytestmark = pytest.mark.integration

PARTITION = 0
"""Every record of these tests goes to one partition, so a stall there shows."""

MESSAGE_LIMIT = 1_000_000
"""The worker's default `CRAWL_MAX_MESSAGE_BYTES`: no dead letter may be larger."""


def _good(request_id: str, url: str, **extra: object) -> bytes:
    return dump(CrawlRequest.model_validate({"request_id": request_id, "urls": [url], **extra}))


def _bad_records(site_url: str) -> dict[bytes, tuple[bytes, str]]:
    """key -> (value, dead-letter code expected)."""
    big_url = "http://a/" + "x" * 1_000_000
    oversized = json.dumps({"request_id": "s-big", "urls": [big_url]}).encode()[:1_000_502]
    deep_metadata = (
        '{"request_id":"s-deep","urls":["' + site_url + '"],"metadata":{"a":'
        + "[" * 5000 + "]" * 5000 + "}}"
    )  # fmt: skip
    inflating = json.dumps(
        {"request_id": "s-1e5", "urls": [site_url], "metadata": {"n": ["1e5"] * 240_000}},
        separators=(",", ":"),
    ).replace('"1e5"', "1e5")
    heavy = {"request_id": "s-heavy", "urls": [site_url], "metadata": {"blob": "m" * 999_500}}
    return {
        b"s-brackets": (b"[" * 100_000, "invalid_request"),
        b"s-deep": (deep_metadata.encode(), "invalid_request"),
        b"s-big": (oversized.ljust(1_000_502, b" "), "too_large"),
        b"s-notjson": (b"{" + b"x" * 999_899, "not_json"),
        b"s-zstd": (
            json.dumps({"request_id": "s-zstd", "urls": [big_url * 10]}).encode(),
            "too_large",
        ),
        b"s-1e5": (inflating.encode(), "invalid_request"),
        b"s-heavy": (json.dumps(heavy).encode(), "invalid_request"),
    }


async def _produce_to_one_partition(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]):
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type="zstd",
        max_request_size=16_000_000,
    )
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, value, key=key, partition=PARTITION)
    finally:
        await producer.stop()


async def _committed_and_end(bootstrap: str, topic: str, group: str) -> tuple[int | None, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        tp = TopicPartition(topic, PARTITION)
        committed = await consumer.committed(tp)
        end = (await consumer.end_offsets([tp]))[tp]
    finally:
        await consumer.stop()
    return committed, end


async def test_records_that_crashed_or_looped_end_in_dead_letters_and_the_partition_goes_on(
    topics, collector, site, start_worker
):
    """Deeply nested JSON (a RecursionError before), a 1,000,502-byte request, 999,900 bytes
    of invalid JSON and a 10 MB zstd request (dead letters too large before), and metadata
    that would make every event larger than a message (960 KB of `1e5`, 999,500 bytes) each
    end with a dead letter that fits in a message, with default settings; a request after
    them on the same partition completes and the committed offset reaches the end."""
    worker = await start_worker()
    bad = _bad_records(site.url("/page/1"))
    good = [(b"s-after", _good("s-after", site.url("/page/2")))]
    await _produce_to_one_partition(
        topics.bootstrap, topics.requests, [(key, value) for key, (value, _) in bad.items()] + good
    )
    await collector.wait_until(lambda seen: seen.terminal("s-after"), deadline_s=120)
    [terminal] = collector.seen.terminal("s-after")
    assert terminal.type == EventType.COMPLETED

    letters = {r.key: r for r in await read_topic(topics.bootstrap, topics.dead_letter, 7, 60)}
    assert set(letters) == set(bad)
    for key, (value, code) in bad.items():
        letter = letters[key]
        headers = {name: raw.decode() for name, raw in letter.headers}
        assert headers["crawlstream-error-code"] == code, (key, headers)
        assert len(letter.value) + sum(len(raw) for _, raw in letter.headers) < MESSAGE_LIMIT
        if len(value) >= MESSAGE_LIMIT or "crawlstream-truncated" in headers:
            assert headers["crawlstream-truncated"] == "value", key
            assert headers["crawlstream-original-size"] == str(len(value)), key
            assert headers["crawlstream-original-sha256"] == hashlib.sha256(value).hexdigest()
            assert value.startswith(letter.value), key
        else:
            assert letter.value == value, key
    for request_id in ("s-1e5", "s-heavy"):
        events = collector.seen.events_of(request_id)
        assert [e.type for e in events] == [EventType.REJECTED], request_id

    group = topics.env()["CRAWL_GROUP_ID"]
    end = len(bad) + len(good)
    async with asyncio.timeout(30):
        while (await _committed_and_end(topics.bootstrap, topics.requests, group)) != (end, end):
            await asyncio.sleep(0.5)
    logged = {entry.get("event") for entry in worker.events()}
    assert not logged & {"request.crashed", "request.retrying", "publish.retrying"}
