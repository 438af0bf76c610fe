"""Hostile input: poison messages, forbidden targets, hostile pages, large results."""

from __future__ import annotations

import json

import pytest
from harness import chromium_pids, descendants, produce, read_topic

from service.contracts import CrawlOptions, CrawlRequest, EventType, dump
from service.messaging.replay import replay_dead_letters

pytestmark = pytest.mark.integration


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest.model_validate(
        {"request_id": request_id, "urls": urls, "options": CrawlOptions(**options)},
        context={"lenient_schemes": True},
    )
    return request_id.encode(), dump(request)


POISON = [
    (b"p-utf8", b"\xff\xfe\xfa", "not_utf8", None),
    (b"p-json", b"{nope", "not_json", None),
    (b"p-array", b"[1, 2, 3]", "not_object", None),
    (
        b"p-id",
        json.dumps({"request_id": "bad id!", "urls": ["http://a/"]}).encode(),
        "invalid_request",
        None,
    ),
    (
        b"p-version",
        json.dumps(
            {"request_id": "p-version", "urls": ["http://a/"], "schema_version": 7}
        ).encode(),
        "unsupported_schema_version",
        "p-version",
    ),
    (
        b"p-field",
        json.dumps({"request_id": "p-field", "urls": ["http://a/"], "priority": 1}).encode(),
        "invalid_request",
        "p-field",
    ),
    (
        b"p-type",
        json.dumps({"request_id": "p-type", "urls": "http://a/"}).encode(),
        "invalid_request",
        "p-type",
    ),
    (
        b"p-many",
        json.dumps(
            {"request_id": "p-many", "urls": [f"http://a/{i}" for i in range(101)]}
        ).encode(),
        "invalid_request",
        "p-many",
    ),
]


async def test_poison_messages_go_to_dead_letters_and_the_worker_keeps_going(
    topics, collector, site, start_worker
):
    """Every kind of invalid message is dead-lettered untouched with headers saying why,
    gets a `rejected` event when its request_id is readable, and a good request after them
    still completes; replay re-publishes chosen dead letters."""
    await start_worker()
    await produce(topics, [(key, value) for key, value, _, _ in POISON])
    await produce(topics, [_request("after-poison", [site.url("/page/1")])])
    await collector.wait_until(lambda seen: seen.terminal("after-poison"), deadline_s=120)

    letters = await read_topic(topics.bootstrap, topics.dead_letter, len(POISON), 60)
    by_key = {record.key: record for record in letters}
    for key, value, code, request_id in POISON:
        record = by_key[key]
        headers = {name: raw.decode() for name, raw in record.headers}
        assert record.value == value
        assert headers["crawlstream-error-code"] == code
        assert headers["crawlstream-source-topic"] == topics.requests
        assert int(headers["crawlstream-source-offset"]) >= 0
        assert headers["crawlstream-error-message"]
        rejected = [
            e for e in collector.seen.events_of(request_id or "") if e.type == EventType.REJECTED
        ]
        assert len(rejected) == (1 if request_id else 0), key

    replayed = await replay_dead_letters(topics.settings(), request_id="p-field")
    assert replayed == 1
    requests = await read_topic(topics.bootstrap, topics.requests, len(POISON) + 2, 60)
    copies = [record.value for record in requests if record.key == b"p-field"]
    assert copies == [by_key[b"p-field"].value] * 2


async def test_forbidden_targets_are_blocked_everywhere(topics, collector, site, start_worker):
    """Other schemes, private and numeric loopback spellings, metadata IPs, a public address on
    a port that is not an egress port, and redirects or subresources towards a private server
    are blocked; that server receives nothing."""
    from testsite import hit_counter  # noqa: PLC0415

    async with hit_counter() as private:
        await start_worker()
        port = private.port
        blocked = {
            "b-file": "file:///etc/passwd",
            "b-ftp": "ftp://127.0.0.1/",
            "b-js": "javascript:alert(1)",
            "b-data": "data:text/html,<h1>x</h1>",
            "b-loop": f"http://127.0.0.1:{port}/",
            "b-decimal": f"http://2130706433:{port}/",
            "b-hex": f"http://0x7f.1:{port}/",
            "b-octal": f"http://0177.0.0.1:{port}/",
            "b-mapped": f"http://[::ffff:127.0.0.1]:{port}/",
            "b-localhost": f"http://localhost:{port}/",
            "b-metadata": "http://169.254.169.254/latest/meta-data/",
            "b-private": "http://10.0.0.1/",
            "b-port": "http://93.184.216.34:8080/",  # Chromium itself refuses :25 (unsafe)
            "b-redirect": site.url(f"/hostile/private-redirect?target={private.url}/x"),
        }
        await produce(topics, [_request(rid, [url]) for rid, url in blocked.items()])
        embed = site.url(f"/hostile/private-embed?target={private.url}/e")
        await produce(topics, [_request("b-embed", [embed], timeout_ms=10_000)])
        everything = [*blocked, "b-embed"]
        await collector.wait_until(
            lambda seen: all(seen.terminal(rid) for rid in everything), deadline_s=180
        )
        for rid in blocked:
            [result] = collector.seen.results_of(rid)
            assert result.error is not None, rid
            assert result.error.code.value == "blocked", (rid, result.error)
        [embedded] = collector.seen.results_of("b-embed")
        assert embedded.status_code == 200
        assert private.hits == 0


HOSTILE = {
    "h-loop": ("/hostile/busy-loop", {"timeout_ms": 5000}),
    "h-dialogs": ("/hostile/dialogs", {}),
    "h-popup": ("/hostile/popup", {}),
    "h-download": ("/hostile/download", {}),
    "h-redirects": ("/hostile/redirect-loop", {}),
    "h-trickle": ("/hostile/trickle", {"timeout_ms": 5000}),
    "h-never-load": ("/hostile/never-load", {"timeout_ms": 5000}),
    "h-huge": ("/hostile/huge?mb=50", {"timeout_ms": 60000}),
    "h-oom": ("/hostile/oom", {"timeout_ms": 30000}),
}


@pytest.mark.long_running
async def test_hostile_pages_end_with_a_result_and_leave_the_worker_healthy(
    topics, collector, site, start_worker
):
    """Busy loops, dialogs, popups, downloads, redirect loops, trickling and never-loading
    pages, a 50 MB page and a renderer-crashing page each end with a result; a normal page
    still works afterwards, and no Chromium process outlives the worker."""
    worker = await start_worker()
    await produce(
        topics,
        [_request(rid, [site.url(path)], **options) for rid, (path, options) in HOSTILE.items()],
    )
    await collector.wait_until(
        lambda seen: all(seen.terminal(rid) for rid in HOSTILE), deadline_s=300
    )
    for rid in HOSTILE:
        [result] = collector.seen.results_of(rid)
        [terminal] = collector.seen.terminal(rid)
        assert terminal.type == EventType.COMPLETED, rid
        assert result.elapsed_ms < 120_000, rid
    await produce(topics, [_request("h-after", [site.url("/page/2")])])
    await collector.wait_until(lambda seen: seen.terminal("h-after"), deadline_s=120)
    [after] = collector.seen.results_of("h-after")
    assert after.ok
    browser_pids = descendants(worker.process.pid) & chromium_pids()
    assert browser_pids
    assert await worker.terminate() == 0
    assert browser_pids & chromium_pids() == set()  # of this worker's: others may run Chromium


async def test_large_results_travel_in_chunks(topics, collector, site, start_worker):
    """A result larger than the message limit arrives whole, reassembled from chunks."""
    await start_worker(CRAWL_MAX_MESSAGE_BYTES="200000")
    await produce(
        topics, [_request("big-1", [site.url("/large?kb=1500")], formats=["html", "text"])]
    )
    await collector.wait_until(lambda seen: seen.terminal("big-1"), deadline_s=120)
    [result] = collector.seen.results_of("big-1")
    assert result.ok
    assert len(result.html or "") > 1_000_000
    assert not result.truncated
