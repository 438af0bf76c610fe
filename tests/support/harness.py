"""Integration-test plumbing: worker processes, unique topics, collecting output messages."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import forkserver
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from service.broker import LocalBroker
from service.contracts import PageResult, ProgressEvent
from service.errors import BrokerUnavailableError
from service.messaging.chunks import Reassembler
from service.messaging.metadata import NO_LEADER, topic_leaders
from service.settings import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

WORKER_START_DEADLINE_S = 90.0

BROKER_START_TRIES = 3
"""A local broker's ports are picked free, then bound by Java seconds later (after it formats
its storage): on a busy machine another process's connection may take one meanwhile, and the
broker exits with `Address already in use`. Each try picks new ports (and a new data dir)."""


@contextlib.asynccontextmanager
async def running_broker(
    data_dir: Path | None = None, **options: Any
) -> AsyncIterator[LocalBroker]:
    """`LocalBroker(**options)`, started within `BROKER_START_TRIES` tries, stopped on exit."""
    for attempt in range(1, BROKER_START_TRIES + 1):
        where = None if data_dir is None else data_dir.with_name(f"{data_dir.name}-{attempt}")
        broker = LocalBroker(data_dir=where, **options)
        try:
            await broker.start()
        except BrokerUnavailableError as exc:
            await broker.stop()
            if attempt == BROKER_START_TRIES:
                raise
            print(f"broker start {attempt} failed ({exc}); trying new ports")  # noqa: T201
            continue
        try:
            yield broker
        finally:
            await broker.stop()
        return


@dataclass
class Topics:
    """A test's own topics and group, and the environment a worker needs for them."""

    bootstrap: str
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:10]}")
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def requests(self) -> str:
        return f"{self.prefix}.requests"

    @property
    def results(self) -> str:
        return f"{self.prefix}.results"

    @property
    def progress(self) -> str:
        return f"{self.prefix}.progress"

    @property
    def dead_letter(self) -> str:
        return f"{self.prefix}.dead-letter"

    @property
    def control(self) -> str:
        return f"{self.prefix}.control"

    @property
    def frontier(self) -> str:
        return f"{self.prefix}.frontier"

    @property
    def pages(self) -> str:
        return f"{self.prefix}.pages"

    @property
    def hosts(self) -> str:
        return f"{self.prefix}.hosts"

    @property
    def cache_index(self) -> str:
        return f"{self.prefix}.cache.index"

    @property
    def cache_bodies(self) -> str:
        return f"{self.prefix}.cache.bodies"

    @property
    def changes(self) -> str:
        return f"{self.prefix}.changes"

    @property
    def change_history(self) -> str:
        return f"{self.prefix}.changes.history"

    @property
    def change_crawls(self) -> str:
        return f"{self.prefix}.changes.crawls"

    @property
    def monitors(self) -> str:
        return f"{self.prefix}.monitors"

    @property
    def monitor_ticks(self) -> str:
        return f"{self.prefix}.monitor.ticks"

    def env(self, **overrides: str) -> dict[str, str]:
        base = {
            "KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
            "CRAWL_REQUESTS_TOPIC": self.requests,
            "CRAWL_RESULTS_TOPIC": self.results,
            "CRAWL_PROGRESS_TOPIC": self.progress,
            "CRAWL_DEAD_LETTER_TOPIC": self.dead_letter,
            "CRAWL_CONTROL_TOPIC": self.control,
            "CRAWL_FRONTIER_TOPIC": self.frontier,
            "CRAWL_PAGES_TOPIC": self.pages,
            "CRAWL_HOSTS_TOPIC": self.hosts,
            "CRAWL_CACHE_INDEX_TOPIC": self.cache_index,
            "CRAWL_CACHE_BODIES_TOPIC": self.cache_bodies,
            "CRAWL_CHANGES_TOPIC": self.changes,
            "CRAWL_CHANGE_HISTORY_TOPIC": self.change_history,
            "CRAWL_CHANGE_CRAWLS_TOPIC": self.change_crawls,
            "CRAWL_MONITORS_TOPIC": self.monitors,
            "CRAWL_MONITOR_TICKS_TOPIC": self.monitor_ticks,
            "CRAWL_GROUP_ID": f"{self.prefix}-group",
            "CRAWL_FETCHER_GROUP_ID": f"{self.prefix}-fetchers",
            "CRAWL_PAGE_PARTITIONS": "4",
            "CRAWL_REQUESTS_PARTITIONS": "4",
            "CRAWL_OUTPUT_PARTITIONS": "4",
            "CRAWL_METRICS_PORT": "0",
            "CRAWL_LOG_FORMAT": "json",
            "CRAWL_SHUTDOWN_GRACE": "20",
        }
        return base | self.extra_env | overrides

    def settings(self, **overrides: Any) -> Settings:
        env = self.env()
        values = {
            "kafka_bootstrap_servers": env["KAFKA_BOOTSTRAP_SERVERS"],
            "requests_topic": self.requests,
            "results_topic": self.results,
            "progress_topic": self.progress,
            "dead_letter_topic": self.dead_letter,
            "control_topic": self.control,
            "frontier_topic": self.frontier,
            "pages_topic": self.pages,
            "hosts_topic": self.hosts,
            "cache_index_topic": self.cache_index,
            "cache_bodies_topic": self.cache_bodies,
            "changes_topic": self.changes,
            "change_history_topic": self.change_history,
            "change_crawls_topic": self.change_crawls,
            "monitors_topic": self.monitors,
            "monitor_ticks_topic": self.monitor_ticks,
            "group_id": env["CRAWL_GROUP_ID"],
            "fetcher_group_id": env["CRAWL_FETCHER_GROUP_ID"],
            "page_partitions": 4,
            "requests_partitions": 4,
            "output_partitions": 4,
            "metrics_port": 0,
        }
        return Settings(**(values | overrides))


async def requests_committed(topics: Topics, deadline_s: float = 60.0) -> None:
    """Return once the coordinators' group has committed every record on the requests topic now:
    none would be delivered again (a worker killed before its periodic commit leaves its
    finished requests to be run again by the next owner)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=topics.bootstrap)
    reader = AIOKafkaConsumer(bootstrap_servers=topics.bootstrap)
    await admin.start()
    await reader.start()
    try:
        async with asyncio.timeout(deadline_s):
            [described] = await admin.describe_topics([topics.requests])
            partitions = [entry["partition"] for entry in described["partitions"]]
            ends = await reader.end_offsets(
                [TopicPartition(topics.requests, p) for p in partitions]
            )
            while True:
                found = await admin.list_consumer_group_offsets(topics.env()["CRAWL_GROUP_ID"])
                committed = {tp: meta.offset for tp, meta in found.items()}
                done = (end == 0 or committed.get(tp, -1) >= end for tp, end in ends.items())
                if ends and all(done):
                    return
                await asyncio.sleep(0.2)
    finally:
        await reader.stop()
        await admin.close()


STARTED: list[WorkerProcess] = []
"""Every `crawlstream` process this test process started, for the logs of a failed test
(`tests/conftest.py`)."""

LOG_TAIL_LINES = 60

TASK_LINES = 200
"""At most this many `task.waiting` lines of a worker in a failed test's report."""


class WorkerProcess:
    """`crawlstream worker` (or another `crawlstream` command) as a child process with its
    own log file; `start` returns once it logged `ready_event` (None: at once)."""

    def __init__(
        self,
        env: dict[str, str],
        log_path: Path,
        name: str,
        preexec: Callable[[], None] | None = None,
        *,
        command: Sequence[str] = ("worker",),
        ready_event: str | None = "worker.started",
    ) -> None:
        self.preexec = preexec
        self.command = tuple(command)
        self.ready_event = ready_event
        # `name` names the log and is the default worker name; a `CRAWL_WORKER_NAME` in `env`
        # wins (a static member restarted under a new log name keeps its group.instance.id)
        self.env = os.environ | {"CRAWL_WORKER_NAME": name} | env
        self.log_path = log_path
        self.name = name
        self.process: asyncio.subprocess.Process | forkserver.ForkedProcess | None = None
        self._events: list[dict[str, Any]] = []
        self._read_to = 0

    async def start(self) -> None:
        self.log_file = self.log_path.open("ab")
        STARTED.append(self)
        if self.preexec is None:
            self.process = await forkserver.spawn(list(self.command), self.env, self.log_path)
        else:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "service",
                *self.command,
                env=self.env,
                stdout=self.log_file,
                stderr=self.log_file,
                preexec_fn=self.preexec,
                start_new_session=True,  # its own process group: kill() takes Chromium along
            )
        if self.ready_event is not None:
            await self.wait_for_log(self.ready_event, WORKER_START_DEADLINE_S)

    def tail_since(self, since: float) -> str | None:
        """The last lines of the log if it was written at or after `since` (epoch s)."""
        try:
            if self.log_path.stat().st_mtime < since:
                return None
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return None
        return "\n".join(line[:400] for line in lines[-LOG_TAIL_LINES:])

    def tasks_now(self, deadline_s: float = 3.0) -> str | None:
        """A running worker's `task.waiting` lines: where each of its tasks waits (SIGUSR1);
        None for another command, an ended process, or no answer within `deadline_s`."""
        if self.command[:1] != ("worker",) or self.process is None:
            return None
        if self.process.returncode is not None:
            return None
        start = self.log_path.stat().st_size
        self.process.send_signal(signal.SIGUSR1)
        until = time.monotonic() + deadline_s
        while time.monotonic() < until:
            with self.log_path.open("rb") as log:
                log.seek(start)
                added = log.read().decode(errors="replace")
            if '"tasks.logged"' in added:
                lines = [line for line in added.splitlines() if '"task.waiting"' in line]
                return "\n".join(lines[:TASK_LINES])
            time.sleep(0.1)  # a failed test's diagnostics: the worker answers within ms
        return None

    def events(self) -> list[dict[str, Any]]:
        """Every JSON line of the log so far (read on from where the last call stopped)."""
        with self.log_path.open("rb") as log:
            log.seek(self._read_to)
            data = log.read()
        whole = data.rfind(b"\n") + 1
        self._read_to += whole
        for line in data[:whole].decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                self._events.append(json.loads(line))
        return list(self._events)

    async def wait_for_log(self, event: str, deadline_s: float) -> dict[str, Any]:
        async with asyncio.timeout(deadline_s):
            while True:
                for entry in self.events():
                    if entry.get("event") == event:
                        return entry
                if self.process is not None and self.process.returncode is not None:
                    raise AssertionError(f"{self.name} exited: {self.log_path.read_text()[-3000:]}")
                await asyncio.sleep(0.2)

    async def terminate(self, deadline_s: float = 60.0) -> int:
        """SIGTERM; the exit code once the process ended within `deadline_s`. A worker still
        running then is asked where its tasks wait (`tasks_now`), and that is the error."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(asyncio.shield(self.process.wait()), deadline_s)
        except TimeoutError:
            waiting = self.tasks_now()
            message = f"{self.name} still running {deadline_s:.0f} s after SIGTERM"
            raise AssertionError(f"{message}; its tasks wait at:\n{waiting}") from None

    async def kill(self) -> None:
        """SIGKILL the worker and every process of its group, as when its container dies."""
        assert self.process is not None
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()

    async def close(self) -> None:
        if self.process is not None and self.process.returncode is None:
            await self.kill()
        self.log_file.close()


@dataclass
class Collected:
    results: list[tuple[PageResult, int]] = field(default_factory=list)
    events: list[tuple[ProgressEvent, int]] = field(default_factory=list)
    keys: dict[str, set[tuple[str, int]]] = field(default_factory=dict)

    def terminal(self, request_id: str) -> list[ProgressEvent]:
        return [e for e, _ in self.events if e.request_id == request_id and e.is_terminal]

    def results_of(self, request_id: str) -> list[PageResult]:
        return [r for r, _ in self.results if r.request_id == request_id]

    def events_of(self, request_id: str) -> list[ProgressEvent]:
        return [e for e, _ in self.events if e.request_id == request_id]


class Collector:
    """Reads the results and progress topics from the beginning in the background."""

    def __init__(self, topics: Topics) -> None:
        self.topics = topics
        self.seen = Collected()
        self._chunks = Reassembler()

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            self.topics.results,
            self.topics.progress,
            bootstrap_servers=self.topics.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
            metadata_max_age_ms=1000,
        )
        try:
            await consumer.start()
            async for record in consumer:
                self._take(record)
        finally:
            await consumer.stop()

    def _take(self, record: Any) -> None:
        key = record.key.decode()
        self.seen.keys.setdefault(key, set()).add((record.topic, record.partition))
        if record.topic == self.topics.progress:
            self.seen.events.append(
                (ProgressEvent.model_validate_json(record.value), record.partition)
            )
            return
        whole = self._chunks.add(record.value, list(record.headers))
        if whole is not None:
            self.seen.results.append((PageResult.model_validate_json(whole), record.partition))

    async def wait_until(self, condition: Callable[[Collected], bool], deadline_s: float) -> None:
        async with asyncio.timeout(deadline_s):
            while not condition(self.seen):
                await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def collecting(topics: Topics) -> AsyncIterator[Collector]:
    collector = Collector(topics)
    task = asyncio.create_task(collector.run())
    try:
        yield collector
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


LEADERS_DEADLINE_S = 30.0

GROUP_DEADLINE_S = 60.0
"""Workers started together hold all partitions within seconds (`bench/group_formation.py`:
2-8 s); the deadline is for a loaded CI machine. Before the single-assignor fix, workers that
joined at the same moment restarted each other's rebalances for minutes (issue 18)."""


async def wait_for_group(
    topics: Topics, members: int, deadline_s: float = GROUP_DEADLINE_S
) -> None:
    """Wait until the test's consumer group is stable with `members` members, each with an
    assignment (4 request partitions: each member holds some). Without this, a worker that
    joins later triggers a rebalance that may come after the work is done."""
    admin = AIOKafkaAdminClient(bootstrap_servers=topics.bootstrap)
    await admin.start()
    env = topics.env()
    pending = [env["CRAWL_GROUP_ID"], env["CRAWL_FETCHER_GROUP_ID"]]
    try:
        async with asyncio.timeout(deadline_s):
            while pending:
                with contextlib.suppress(KafkaError):
                    [response] = await admin.describe_consumer_groups([pending[0]])
                    # raw DescribeGroups: (error, group, state, protocol type, protocol,
                    # members: (id, client id, host, metadata, assignment))
                    [(_, _, state, _, _, found, *_)] = response.groups
                    assigned = [member for member in found if member[4]]
                    if state == "Stable" and len(assigned) == members == len(found):
                        pending.pop(0)
                        continue
                await asyncio.sleep(0.3)
    finally:
        await admin.close()


async def wait_for_leaders(topics: Topics, partitions: int = 4) -> None:
    """Wait until every partition of the test's topics has a leader: a reader that starts on
    a partition still being created gets NotLeaderForPartition and may miss its start."""
    names = (
        topics.requests,
        topics.results,
        topics.progress,
        topics.dead_letter,
        topics.control,
        topics.frontier,
        topics.pages,
        topics.hosts,
        topics.cache_index,
        topics.cache_bodies,
        topics.changes,
        topics.change_history,
        topics.change_crawls,
    )
    wanted = partitions * (len(names) - 1) + 1  # the host directory has one
    settings = topics.settings()
    async with asyncio.timeout(LEADERS_DEADLINE_S):
        while True:
            described = await topic_leaders(settings, names)
            leaders = [leader for found in described.values() for leader in found.values()]
            if len(leaders) == wanted and all(leader != NO_LEADER for leader in leaders):
                return
            await asyncio.sleep(0.2)


async def produce(topics: Topics, messages: list[tuple[bytes | None, bytes | None]]) -> None:
    """Records to the requests topic, each acknowledged by the broker."""
    await send(topics, [(topics.requests, key, value) for key, value in messages])


async def send(
    topics: Topics, messages: list[tuple[str, str | bytes | None, bytes | None]]
) -> None:
    """Records to any topic (a None value is a tombstone), each acknowledged by the broker."""
    producer = AIOKafkaProducer(bootstrap_servers=topics.bootstrap, acks="all")
    await producer.start()
    try:
        for topic, key, value in messages:
            encoded = key.encode() if isinstance(key, str) else key
            await producer.send_and_wait(topic, value, key=encoded)
    finally:
        await producer.stop()


async def read_topic(
    bootstrap: str, topic: str, count: int, deadline_s: float, key: bytes | None = None
) -> list[Any]:
    """The first `count` records of `topic` (with `key`, if given: a topic other tests share),
    read from the beginning within the deadline."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
        metadata_max_age_ms=1000,
    )
    records: list[Any] = []
    try:
        await consumer.start()
        async with asyncio.timeout(deadline_s):
            async for record in consumer:
                if key is None or record.key == key:
                    records.append(record)
                if len(records) >= count:
                    break
    finally:
        await consumer.stop()
    return records


def chromium_pids() -> set[int]:
    """Pids of every Chromium process on the machine."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if b"chromium" in (entry / "cmdline").read_bytes().split(b"\0")[0]:
                    found.add(int(entry.name))
    return found


def descendants(pid: int) -> set[int]:
    """Pids of all processes below `pid`."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found
