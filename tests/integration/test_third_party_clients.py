"""Clients in other languages work as docs/contracts.md says: its kcat lines, murmur2
partitions, and chunked results that string-based clients can join."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shlex
import sys
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _pages import MULTIBYTE_LINE
from aiokafka.partitioner import murmur2
from harness import Topics, WorkerProcess, running_broker
from kcat import follow_in_terminal, kcat_or_skip, run, shell_commands

from service.contracts import EventType, PageResult, ProgressEvent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from kcat import Ran
    from testsite import TestSite

    from service.broker import LocalBroker

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DOC_PAGE = REPO / "docs" / "contracts.md"
DOC_SECTION = "## Producing from other languages"
DOC_BOOTSTRAP = "localhost:9092"
"""The address the page's kcat lines use; the test puts its own broker's in its place."""

DOC_LINES = {
    "create": lambda line: "crawlstream topics create" in line,
    "partition": lambda line: "crawlstream topics partition" in line,
    "produce": lambda line: "kcat -P" in line,
    "so_far": lambda line: "-t crawl.progress" in line and " -e " in line and " -p " not in line,
    "live": lambda line: "-t crawl.progress" in line and " -e " not in line,
    "one_partition": lambda line: "-t crawl.progress" in line and " -p " in line,
    "results": lambda line: "-t crawl.results" in line,
}
"""What each line of the page's kcat block is for; every line must be one of these."""

TERMINAL = re.compile(r'"type":"(completed|failed|expired)"')
RESULT_DEADLINE_S = 180.0
"""Time for a worker to start and answer one request on a busy machine."""

POLL_S = 1.0
"""Pause between two reads of a topic to its end."""

CHUNK_CONTENT_TYPE = "application/vnd.crawlstream.chunk"


@pytest.fixture
async def fresh_broker() -> AsyncIterator[LocalBroker]:
    """A broker of this test's own: no topic exists yet and no worker has run against it."""
    async with running_broker() as broker:
        yield broker


def doc_lines(bootstrap: str) -> dict[str, str]:
    """The page's kcat block by purpose, pointed at `bootstrap` (nothing else changed)."""
    commands = shell_commands(DOC_PAGE.read_text(), DOC_SECTION)
    found = {kind: [c for c in commands if wanted(c)] for kind, wanted in DOC_LINES.items()}
    assert all(len(lines) == 1 for lines in found.values()), found
    assert sorted(commands) == sorted(lines[0] for lines in found.values()), commands
    return {kind: lines[0].replace(DOC_BOOTSTRAP, bootstrap) for kind, lines in found.items()}


async def read_until_terminal(line: str, env: dict[str, str], request_id: str) -> list[str]:
    """Run a line that reads to the end and exits, until it shows the request's last event."""
    async with asyncio.timeout(RESULT_DEADLINE_S):
        while True:
            ran = await run(line, env, REPO)
            mine = [text for text in ran.lines if text.startswith(f"{request_id} ")]
            if any(TERMINAL.search(text) for text in mine):
                return mine
            await asyncio.sleep(POLL_S)


def events(lines: list[str]) -> list[ProgressEvent]:
    return [ProgressEvent.model_validate_json(line.split(" ", 1)[1]) for line in lines]


def kcat_json(ran: Ran) -> list[dict[str, Any]]:
    """kcat `-J` lines; each must be valid UTF-8 and valid JSON."""
    assert ran.returncode == 0, ran.stderr
    return [json.loads(line) for line in ran.lines]


def headers_of(message: dict[str, Any]) -> dict[str, str]:
    flat = message.get("headers") or []
    return dict(zip(flat[::2], flat[1::2], strict=True))


async def test_the_documented_kcat_lines_work_as_written(fresh_broker, tmp_path):
    """On a fresh broker the documented lines create the topics, produce before any worker has
    run, then read r-1's events (to the end and exit; live on a terminal; from its murmur2
    partition alone) and its result."""
    kcat_or_skip()
    bootstrap = fresh_broker.bootstrap_servers
    lines = doc_lines(bootstrap)
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    for kind in ("create", "produce"):
        ran = await run(lines[kind], env, REPO)
        assert ran.returncode == 0, (kind, ran.stderr)
    worker = WorkerProcess(
        env | {"CRAWL_METRICS_PORT": "0", "CRAWL_LOG_FORMAT": "json"}, tmp_path / "w.log", "w1"
    )
    try:
        await worker.start()
        so_far = await read_until_terminal(lines["so_far"], env, "r-1")
        live = await follow_in_terminal(
            lines["live"], env, REPO, TERMINAL.search, RESULT_DEADLINE_S
        )
        one_partition = await run(lines["one_partition"], env, REPO)
        partitions = await run(lines["partition"], env, REPO)
        results = kcat_json(await run(lines["results"], env, REPO))
    finally:
        await worker.close()

    seen = events(so_far)
    assert [e.type for e in seen] == [EventType.ACCEPTED, seen[1].type, EventType.COMPLETED]
    assert seen[1].type in {EventType.PAGE_SUCCEEDED, EventType.PAGE_FAILED}  # offline: dns
    assert events([text for text in live if text.startswith("r-1 ")]) == seen
    match = re.search(r" -p (\d+) ", lines["one_partition"])
    assert match is not None
    key_partition = int(match.group(1))
    assert one_partition.lines == so_far  # every r-1 message is on the documented partition
    assert seen[0].source is not None
    assert seen[0].source.partition == key_partition  # where murmur2_random put the request
    assert partitions.stdout.decode().split() == [
        text
        for topic in (
            "crawl.requests",
            "crawl.results",
            "crawl.progress",
            "crawl.dead-letter",
            "crawl.control",
            "crawl.frontier",
        )
        for text in (topic, str(key_partition))
    ]
    [result] = results
    assert result["key"] == "r-1"
    assert result["partition"] == key_partition
    assert headers_of(result)["content-type"] == "application/json"
    assert PageResult.model_validate_json(result["payload"]).url == "https://example.com/"


async def test_topics_create_makes_the_topics_a_producer_can_write_at_once(kafka, tmp_path):
    """`crawlstream topics create` creates the missing topics with the configured partitions
    and returns once kcat can produce to them; run again, it reports the existing ones as
    they are (their real counts, not the settings'), and `topics partition` uses those."""
    kcat = kcat_or_skip()
    topics = Topics(bootstrap=kafka)
    crawlstream = f"{shlex.quote(sys.executable)} -m service topics"
    first = await run(f"{crawlstream} create", topics.env(), REPO)
    assert first.returncode == 0, first.stderr
    names = [
        topics.requests,
        topics.results,
        topics.progress,
        topics.dead_letter,
        topics.control,
        topics.frontier,
    ]
    by_page = [topics.pages, topics.cache_index, topics.cache_bodies, topics.change_history]
    by_monitor = [topics.monitors, topics.monitor_ticks]
    every = [*names[:5], topics.changes, topics.change_crawls, *names[5:], *by_monitor, *by_page]
    assert first.lines == [
        *(f"{name}\t4 partitions\tcreated" for name in every),
        f"{topics.hosts}\t1 partition\tcreated",
    ]
    produce = f"echo 'r-1|{{}}' | {kcat} -P -b {kafka} -t {topics.requests} -K '|'"
    produced = await run(produce, {}, tmp_path)
    assert produced.returncode == 0, produced.stderr
    again = await run(f"{crawlstream} create", topics.env(CRAWL_OUTPUT_PARTITIONS="6"), REPO)
    assert again.lines == [
        *(f"{name}\t4 partitions\texists" for name in every),
        f"{topics.hosts}\t1 partition\texists",
    ]
    where = await run(f"{crawlstream} partition r-1", topics.env(), REPO)
    assert where.lines == [f"{name}\t{(0x7FFFFFFF & murmur2(b'r-1')) % 4}" for name in names]


async def test_a_chunked_multibyte_result_is_reassembled_from_kcat_output_alone(
    topics: Topics, site: TestSite, start_worker
):
    """A result of 2.5 MB of multi-byte text goes out in chunks that kcat `-J` prints as valid
    JSON lines labelled as chunks; their payloads joined in index order match the digest and
    parse as the result."""
    kcat = kcat_or_skip()
    await start_worker()
    request = {
        "request_id": "mb-1",
        "urls": [site.url("/multibyte")],
        "options": {"formats": ["text"]},
    }
    record = shlex.quote(f"mb-1|{json.dumps(request)}")
    ran = await run(
        f"echo {record} | {kcat} -P -b {topics.bootstrap} -t {topics.requests} -K '|'", {}, REPO
    )
    assert ran.returncode == 0, ran.stderr
    progress = f"{kcat} -C -b {topics.bootstrap} -t {topics.progress} -e -f '%k %s\\n'"
    await read_until_terminal(progress, {}, "mb-1")
    messages = kcat_json(
        await run(f"{kcat} -C -b {topics.bootstrap} -t {topics.results} -e -J", {}, REPO)
    )

    chunks: dict[str, dict[int, str]] = defaultdict(dict)
    counts, digests = {}, {}
    for message in messages:
        assert message["key"] == "mb-1"
        headers = headers_of(message)
        assert headers["content-type"] == CHUNK_CONTENT_TYPE
        index, count = (int(part) for part in headers["crawlstream-chunk"].split("/"))
        chunk_id = headers["crawlstream-chunk-id"]
        chunks[chunk_id][index] = message["payload"]
        counts[chunk_id], digests[chunk_id] = count, headers["crawlstream-sha256"]
    [(chunk_id, pieces)] = chunks.items()
    assert sorted(pieces) == list(range(counts[chunk_id]))
    assert counts[chunk_id] >= 2
    whole = "".join(pieces[index] for index in sorted(pieces)).encode()
    assert hashlib.sha256(whole).hexdigest() == digests[chunk_id]
    result = PageResult.model_validate_json(whole)
    assert result.ok
    assert not result.truncated
    assert f"{MULTIBYTE_LINE} {MULTIBYTE_LINE}" in (result.text or "")
