"""Duplicates and re-runs when workers come and go or the broker goes away, in one run.

    .venv/bin/python bench/failover.py [--requests 60] [--urls 5] [--page-ms 2000]
        [--hosts 8] [--outage 60] [--deadline 900] [--stall 180]
        [--churn 300] [--churn-every 20]
        [--scenario all|workers|roles|outage|churn]

Each scenario gets its own broker (LocalBroker on a fresh data dir and port), topics and groups
(12 request, 12 page and 12 output partitions), and crawls unique `/slow` pages of the local
test site (`--page-ms` each) in `--requests` requests of `--urls` URLs. The site answers on
`--hosts` loopback addresses (tests/support/hostsite.py; the URLs go round-robin over them):
pages are keyed by host, so on one host a single fetcher would hold every page.

(1) workers: 3 `crawlstream worker` processes. While the requests run, one is killed with
    SIGKILL once 15% of the URLs have a result (its browser with it, as when a pod dies),
    another gets SIGTERM at 35%, and a fourth worker starts at 55%: three failover events.
(2) roles: 2 coordinators (`CRAWL_ROLE=coordinator`) and 2 fetchers (`CRAWL_ROLE=fetcher`).
    Once 15% of the URLs have a result, the coordinator that sent the most progress events is
    killed with SIGKILL; at 35%, the fetcher that rendered the most pages: two failover events.
(3) outage: one worker. Once 10% of the URLs have a result the broker is killed (SIGKILL, its
    data kept), stays down for `--outage` seconds and starts again on the same data and port:
    one failover event.
(4) churn: 1 coordinator and 2 fetchers (static members, as a StatefulSet's pods). Requests
    arrive one every 2 s for `--churn` seconds (at least `--requests` of them), and every
    `--churn-every` seconds a fetcher (the two in turn) is killed with SIGKILL and started
    again under its name: 14 failover events in 5 minutes. Its targets: 0 pages lost and 0
    `poison` results (every page here is innocent: a `/slow` page that kills nobody).

Every wait has a deadline. A scenario waits until every request has a `completed` event and
every URL a result (giving up at `--deadline`, or after `--stall` seconds without any new
output, and then reporting partial figures), then until the group's committed offsets reach
the end of the requests topic (nothing is left to redeliver), stops its workers, and reads the
results and progress topics from the beginning.

Figures: results (reassembled `PageResult`s); unique `result_id`s; duplicates = results -
unique, and their share of results; lost = URLs of a request without any result, and requests
without a terminal event (both must be 0); runs = distinct (request_id, run_id) of the
progress events; abandoned = runs without a terminal event; re-runs per failover =
(runs - requests) / failover events. Notes under the table give the timeline, abandoned runs
by worker, and the warnings and errors in each worker's log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from _common import ROOT
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from harness import Collected, Topics, WorkerProcess, collecting, descendants
from hostsite import HostSite, serve_hosts

from service.broker import LocalBroker
from service.contracts import CrawlRequest, EventType, PageResult, ProgressEvent, dump
from service.messaging.chunks import Reassembler
from service.messaging.topics import ensure_topics

if TYPE_CHECKING:
    from aiokafka.structs import ConsumerRecord
    from harness import Collector

PARTITIONS: Final = 12
"""Partitions of the requests topic (the service's default) and of the output topics."""

KILL_AT: Final = 0.15
"""Share of the URLs with a result when scenario 1 kills a worker with SIGKILL."""
TERM_AT: Final = 0.35
"""... when it sends SIGTERM to another worker."""
JOIN_AT: Final = 0.55
"""... when it starts a fourth worker."""
OUTAGE_AT: Final = 0.10
"""Share of the URLs with a result when scenario 3 kills the broker."""

FETCHER_KILL_AT: Final = 0.35
"""Share of the URLs with a result when scenario 2 kills a fetcher with SIGKILL."""

TARGETS: Final = {
    "workers": (0.10, 0.26),
    "roles": (0.05, None),
    "outage": (0.05, 0.48),
    "churn": (0.10, None),
}
"""Duplicate share per scenario: (the issue's target, the issue's figure for today, if any)."""

CHURN_SPACING_S: Final = 2.0
"""Scenario 4: one request every this many seconds while fetchers are killed."""

GROUP_DEADLINE_S: Final = 120.0
"""How long a new group may take to spread the partitions over its workers."""
SETTLE_DEADLINE_S: Final = 120.0
"""After the last request completed: how long the group's commits may take to reach the end."""
STOP_DEADLINE_S: Final = 60.0
"""How long a worker may take to exit after SIGTERM (20 s shutdown grace, then the browser)."""
READ_DEADLINE_S: Final = 120.0
"""How long the final read of the output topics may take."""
KAFKA_CALL_S: Final = 15.0
"""Deadline of one client call to the broker."""
POLL_S: Final = 0.5
"""Pause between two looks at a condition."""

MARK_VARIABLE: Final = "CRAWLSTREAM_FAILOVER_BENCH"
"""Set in this process's environment, so every child (broker, workers, their browsers)
inherits it: the final sweep finds leftovers by it, also orphans of a killed worker."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    scenario: str
    requests: int
    failovers: int
    results: int
    unique: int
    runs: int
    abandoned: int
    lost_pages: int
    """URLs of the requests without any result."""
    lost_requests: int
    """Requests without any terminal event."""
    poison: int
    """Results with code `poison` (pages quarantined after deaths of their fetcher)."""
    complete: bool
    """Every request completed within the deadline (else the figures are partial)."""
    notes: list[str]

    @property
    def duplicates(self) -> int:
        return self.results - self.unique

    @property
    def share(self) -> float:
        return self.duplicates / self.results if self.results else 0.0

    @property
    def runs_per_request(self) -> float:
        return self.runs / self.requests

    @property
    def reruns_per_failover(self) -> float:
        return (self.runs - self.requests) / self.failovers


@dataclass
class Rig:
    """One scenario's topics, group, requests, worker processes and what happened."""

    topics: Topics
    requests: dict[str, list[str]]
    deadline_s: float
    stall_s: float
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)
    ends: dict[int, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started: float = 0.0
    complete: bool = False

    @classmethod
    async def create(
        cls, bootstrap: str, site: HostSite, args: argparse.Namespace, requests: int = 0
    ) -> Rig:
        """`requests`: how many (default: `--requests`)."""
        topics = Topics(
            bootstrap=bootstrap,
            prefix=f"fo{uuid.uuid4().hex[:8]}",
            extra_env={
                "CRAWL_ALLOWED_HOSTS": site.allowed_hosts(args.hosts),
                "CRAWL_REQUESTS_PARTITIONS": str(PARTITIONS),
                "CRAWL_OUTPUT_PARTITIONS": str(PARTITIONS),
                "CRAWL_PAGE_PARTITIONS": str(PARTITIONS),
            },
        )
        await ensure_topics(
            topics.settings(
                requests_partitions=PARTITIONS,
                output_partitions=PARTITIONS,
                page_partitions=PARTITIONS,
            )
        )
        requests = {
            f"{topics.prefix}-{r}": [
                site.origin((r * args.urls + u) % args.hosts)
                + f"/slow?ms={args.page_ms}&u={topics.prefix}-{r}-{u}"
                for u in range(args.urls)
            ]
            for r in range(requests or args.requests)
        }
        return cls(topics=topics, requests=requests, deadline_s=args.deadline, stall_s=args.stall)

    # --- time and progress ---------------------------------------------------------------

    def now(self) -> float:
        return asyncio.get_running_loop().time() - self.started

    def remaining(self) -> float:
        return max(0.0, self.deadline_s - self.now())

    def note(self, text: str) -> None:
        self.notes.append(f"t={self.now():6.1f} s  {text}")

    def share_done(self, seen: Collected) -> float:
        urls = sum(len(urls) for urls in self.requests.values())
        return len({(r.request_id, r.url) for r, _ in seen.results}) / urls

    def unfinished(self, seen: Collected) -> list[str]:
        """Requests without a `completed` event or without a result for each URL."""
        completed = {e.request_id for e, _ in seen.events if e.type == EventType.COMPLETED}
        pages = {(r.request_id, r.url) for r, _ in seen.results}
        return [
            rid
            for rid, urls in self.requests.items()
            if rid not in completed or any((rid, url) not in pages for url in urls)
        ]

    async def reach(self, collector: Collector, share: float) -> None:
        await collector.wait_until(lambda seen: self.share_done(seen) >= share, self.remaining())

    # --- workers -------------------------------------------------------------------------

    async def add_workers(
        self,
        stack: contextlib.AsyncExitStack,
        *names: str,
        role: str = "all",
        static: bool = False,
        life: int = 0,
    ) -> None:
        """Start `names`; `static`: as static members under their names, so a restarted one
        (`life` counts its restarts, for its log's name) takes its partitions back at once."""
        log_dir = ROOT / ".bench"
        log_dir.mkdir(exist_ok=True)
        fresh = []
        extra = {"CRAWL_STATIC_MEMBERSHIP": "true"} if static else {}
        for name in names:
            suffix = f"-{life}" if life else ""
            worker = WorkerProcess(
                self.topics.env(CRAWL_ROLE=role, CRAWL_WORKER_NAME=name, **extra),
                log_dir / f"{self.topics.prefix}-{name}{suffix}.log",
                f"{name}{suffix}",
            )
            self.roles[name] = role
            stack.push_async_callback(worker.close)
            self.workers[name] = worker
            fresh.append(worker)
        await asyncio.gather(*(worker.start() for worker in fresh))

    async def wait_group(self) -> None:
        """Until the live workers' assignments (from their logs) split every partition of both
        groups: the requests over the coordinators, the pages over the fetchers."""
        live = [(w, self.roles[name]) for name, w in self.workers.items() if name not in self.gone]
        members = {
            "request": [w for w, role in live if role in {"all", "coordinator"}],
            "page": [w for w, role in live if role in {"all", "fetcher"}],
        }
        async with asyncio.timeout(GROUP_DEADLINE_S):
            while True:
                if all(
                    _split([_assigned(worker, consumer) for worker in group])
                    for consumer, group in members.items()
                ):
                    return
                await asyncio.sleep(POLL_S)

    async def kill(self, name: str, collector: Collector) -> None:
        """SIGKILL a worker and every process under it, as when its container dies."""
        worker = self.workers[name]
        tree = descendants(_pid(worker))
        await worker.kill()
        _kill_all(tree)
        self.gone.add(name)
        done = self.share_done(collector.seen)
        self.note(f"kill -9 {name} and its {len(tree)} child processes ({done:.0%} of URLs done)")

    async def terminate(self, name: str, *, failover: bool = False) -> None:
        worker = self.workers[name]
        if worker.process is None or worker.process.returncode is not None:
            return
        tree = descendants(_pid(worker))
        began = self.now()
        try:
            code = await worker.terminate(STOP_DEADLINE_S)
        except TimeoutError:
            await worker.kill()
            self.note(f"{name} did not exit within {STOP_DEADLINE_S:.0f} s of SIGTERM: killed")
        else:
            if failover or code != 0:
                self.note(f"SIGTERM {name} (sent at t={began:.1f} s): exit code {code}")
        left = _kill_all(tree)
        if left:
            self.note(f"{name} left {left} child processes running after its exit: killed")
        self.gone.add(name)

    async def join(self, stack: contextlib.AsyncExitStack, name: str, collector: Collector) -> None:
        await self.reach(collector, JOIN_AT)
        done = self.share_done(collector.seen)
        self.note(f"starting {name} ({done:.0%} of URLs done)")
        await self.add_workers(stack, name)
        self.note(f"{name} started")

    async def stop_workers(self) -> None:
        """SIGTERM the live workers one after the other (each commits before it leaves)."""
        for name in list(self.workers):
            await self.terminate(name)

    # --- Kafka ---------------------------------------------------------------------------

    async def produce(self, spacing_s: float = 0.0) -> None:
        """Produce every request (`spacing_s` apart); remember the requests topic's end
        offset per partition."""
        self.started = asyncio.get_running_loop().time()
        producer = AIOKafkaProducer(
            bootstrap_servers=self.topics.bootstrap, acks="all", enable_idempotence=True
        )
        await asyncio.wait_for(producer.start(), KAFKA_CALL_S)
        try:
            for rid, urls in self.requests.items():
                value = dump(CrawlRequest(request_id=rid, urls=urls))
                sent = await asyncio.wait_for(
                    producer.send_and_wait(self.topics.requests, value, key=rid.encode()),
                    KAFKA_CALL_S,
                )
                self.ends[sent.partition] = max(self.ends.get(sent.partition, 0), sent.offset + 1)
                if spacing_s:
                    await asyncio.sleep(spacing_s)  # the load's own pace
        finally:
            await asyncio.wait_for(producer.stop(), KAFKA_CALL_S)

    async def commits_reach_end(self) -> None:
        """Until the group has committed every request record (nothing left to redeliver)."""
        admin = AIOKafkaAdminClient(
            bootstrap_servers=self.topics.bootstrap, request_timeout_ms=5000
        )
        await asyncio.wait_for(admin.start(), KAFKA_CALL_S)
        try:
            while True:
                with contextlib.suppress(KafkaError, TimeoutError):
                    offsets = await asyncio.wait_for(
                        admin.list_consumer_group_offsets(f"{self.topics.prefix}-group"),
                        KAFKA_CALL_S,
                    )
                    committed = {
                        tp.partition: meta.offset
                        for tp, meta in offsets.items()
                        if tp.topic == self.topics.requests
                    }
                    if all(committed.get(p, -1) >= end for p, end in self.ends.items()):
                        return
                await asyncio.sleep(POLL_S)
        finally:
            await asyncio.wait_for(admin.close(), KAFKA_CALL_S)

    # --- the end of a scenario -------------------------------------------------------------

    async def wait_finished(self, collector: Collector) -> str | None:
        """Until every request finished (None), the deadline, or `stall_s` without output."""
        count, changed = -1, self.now()
        while True:
            if not self.unfinished(collector.seen):
                return None
            if len(collector.seen.results) + len(collector.seen.events) != count:
                count = len(collector.seen.results) + len(collector.seen.events)
                changed = self.now()
            if self.now() - changed >= self.stall_s:
                return f"stalled: no output for {self.stall_s:.0f} s"
            if not self.remaining():
                return "deadline reached"
            await asyncio.sleep(POLL_S)

    async def finish(self, scenario: str, collector: Collector, failovers: int) -> Figures:
        why = await self.wait_finished(collector)
        if why is not None:
            left = self.unfinished(collector.seen)
            self.note(f"{why}; {len(left)} requests without `completed` or a result per URL:")
            self.notes.append(f"  {', '.join(left[:10])}{' ...' if len(left) > 10 else ''}")
        else:
            self.complete = True
            self.note("every request completed, every URL has a result")
            try:
                async with asyncio.timeout(SETTLE_DEADLINE_S):
                    await self.commits_reach_end()
                self.note("the group's commits reached the end of the requests topic")
            except TimeoutError:
                self.note(f"commits did not reach the end within {SETTLE_DEADLINE_S:.0f} s")
        live = (len(collector.seen.results), len(collector.seen.events))
        await self.stop_workers()
        seen = await read_outputs(self.topics)
        extra = (len(seen.results) - live[0], len(seen.events) - live[1])
        if any(extra):
            self.note(f"final read: {extra[0]} results, {extra[1]} events beyond the live reader")
        for name, worker in self.workers.items():
            troubles = _troubles(worker)
            if troubles:
                self.notes.append(f"{name}'s log, warnings and errors: {troubles}")
        return measure(self, scenario, seen, failovers)


def _assigned(worker: WorkerProcess, consumer: str) -> set[int]:
    """The partitions a worker's `consumer` ("request" or "page") owns now, by its
    `consumer.assigned`/`revoked` log lines."""
    owned: set[int] = set()
    for entry in worker.events():
        if entry.get("consumer") != consumer:
            continue
        if entry.get("event") == "consumer.assigned":
            owned = set(entry["partitions"])
        elif entry.get("event") == "consumer.revoked":
            owned -= set(entry["partitions"])
    return owned


def _split(owned: list[set[int]]) -> bool:
    """Every member owns some partitions, and together they own each partition once."""
    return all(owned) and sum(map(len, owned)) == len(set().union(*owned)) == PARTITIONS


def _troubles(worker: WorkerProcess) -> dict[str, int]:
    """How often each warning or error event occurs in a worker's log."""
    found = Counter(
        str(entry.get("event"))
        for entry in worker.events()
        if entry.get("level") in {"warning", "error", "critical"}
    )
    return dict(found.most_common())


def _pid(worker: WorkerProcess) -> int:
    if worker.process is None:
        raise RuntimeError(f"{worker.name} was never started")
    return worker.process.pid


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _kill_all(pids: set[int]) -> int:
    """SIGKILL those of `pids` still alive; how many were."""
    alive = [pid for pid in pids if _alive(pid)]
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(alive)


def sweep() -> list[str]:
    """SIGKILL every process that carries this run's mark in its environment but this one
    and its fork server (the harness's helper that forks workers: it lives as long as this
    process does)."""
    mark = f"{MARK_VARIABLE}={os.environ[MARK_VARIABLE]}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid() or _fork_server(entry):
            continue
        with contextlib.suppress(OSError):
            if mark in (entry / "environ").read_bytes().split(b"\0") and _alive(int(entry.name)):
                found.append(
                    f"{(entry / 'comm').read_text().strip()}[{entry.name}]: {_described(entry)}"
                )
                os.kill(int(entry.name), signal.SIGKILL)
    return found


def _fork_server(entry: Path) -> bool:
    with contextlib.suppress(OSError):
        stat = (entry / "stat").read_text()
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        command = (entry / "cmdline").read_bytes().split(b"\0")
        return (
            parent == os.getpid() and command[1:2] != [] and command[1].endswith(b"/forkserver.py")
        )
    return False


def _described(entry: Path) -> str:
    """A process's parent and the start of its command line, for the sweep's note."""
    stat = (entry / "stat").read_text()
    parent = stat[stat.rindex(")") + 2 :].split()[1]
    command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return f"parent {parent}, {command[:120].strip()}"


async def read_outputs(topics: Topics) -> Collected:
    """Every result and progress event, read from the beginning up to the current end."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=topics.bootstrap, group_id=None, enable_auto_commit=False
    )
    await asyncio.wait_for(consumer.start(), KAFKA_CALL_S)
    try:
        async with asyncio.timeout(READ_DEADLINE_S):
            partitions = [
                TopicPartition(topic, p)
                for topic in (topics.results, topics.progress)
                for p in range(PARTITIONS)  # as `Rig.create` made them
            ]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            ends = await consumer.end_offsets(partitions)
            return await _read_to(consumer, ends, topics)
    finally:
        await asyncio.wait_for(consumer.stop(), KAFKA_CALL_S)


async def _read_to(
    consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int], topics: Topics
) -> Collected:
    seen = Collected()
    chunks = Reassembler()
    while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
        batch = await consumer.getmany(timeout_ms=1000)
        for records in batch.values():
            for record in records:
                _take(seen, chunks, record, topics)
    return seen


def _take(
    seen: Collected, chunks: Reassembler, record: ConsumerRecord[bytes, bytes], topics: Topics
) -> None:
    if record.topic == topics.progress:
        seen.events.append((ProgressEvent.model_validate_json(record.value), record.partition))
        return
    whole = chunks.add(record.value, list(record.headers))
    if whole is not None:
        seen.results.append((PageResult.model_validate_json(whole), record.partition))


def measure(rig: Rig, scenario: str, seen: Collected, failovers: int) -> Figures:
    results = [result for result, _ in seen.results]
    events = [event for event, _ in seen.events]
    runs = {(e.request_id, e.run_id): e.worker for e in events}
    ended = {(e.request_id, e.run_id) for e in events if e.is_terminal}
    abandoned = Counter(worker for run, worker in runs.items() if run not in ended)
    if abandoned:
        rig.notes.append(f"abandoned runs by worker: {dict(sorted(abandoned.items()))}")
    got = {(r.request_id, r.url) for r in results}
    lost_pages = sum((rid, url) not in got for rid, urls in rig.requests.items() for url in urls)
    lost_requests = len(set(rig.requests) - {e.request_id for e in events if e.is_terminal})
    failed = Counter(r.error.code.value for r in results if r.error is not None)
    if failed:
        rig.notes.append(f"results that are not ok, by code: {dict(failed)}")
    poison = {(r.request_id, r.url) for r in results if r.error and r.error.code == "poison"}
    return Figures(
        scenario=scenario,
        requests=len(rig.requests),
        failovers=failovers,
        results=len(results),
        unique=len({r.result_id for r in results}),
        runs=len(runs),
        abandoned=sum(abandoned.values()),
        lost_pages=lost_pages,
        lost_requests=lost_requests,
        poison=len(poison),
        complete=rig.complete,
        notes=rig.notes,
    )


async def _broker(stack: contextlib.AsyncExitStack) -> LocalBroker:
    """A broker of the scenario's own, on a fresh data dir (removed at the end) and port."""
    data = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="failover-kafka-")))
    return await stack.enter_async_context(LocalBroker(data_dir=data / "kafka"))


async def workers_scenario(site: HostSite, args: argparse.Namespace) -> Figures:
    async with contextlib.AsyncExitStack() as stack:
        broker = await _broker(stack)
        rig = await Rig.create(broker.bootstrap_servers, site, args)
        await rig.add_workers(stack, "w1", "w2", "w3")
        await rig.wait_group()
        collector = await stack.enter_async_context(collecting(rig.topics))
        await rig.produce()
        try:
            await rig.reach(collector, KILL_AT)
            await rig.kill("w1", collector)
            await rig.reach(collector, TERM_AT)
            async with asyncio.TaskGroup() as group:
                group.create_task(rig.terminate("w2", failover=True))
                group.create_task(rig.join(stack, "w4", collector))
        except* TimeoutError:
            rig.note("deadline reached before every fault was played")
        return await rig.finish("workers", collector, failovers=3)


def _busiest(seen: Collected, names: list[str], *, pages: bool) -> str:
    """Of `names`, the worker named in the most results (`pages`) or progress events."""
    counts = Counter(
        [r.worker for r, _ in seen.results] if pages else [e.worker for e, _ in seen.events]
    )
    return max(names, key=lambda name: counts[name])


async def roles_scenario(site: HostSite, args: argparse.Namespace) -> Figures:
    async with contextlib.AsyncExitStack() as stack:
        broker = await _broker(stack)
        rig = await Rig.create(broker.bootstrap_servers, site, args)
        await rig.add_workers(stack, "c1", "c2", role="coordinator")
        await rig.add_workers(stack, "f1", "f2", role="fetcher")
        await rig.wait_group()
        collector = await stack.enter_async_context(collecting(rig.topics))
        await rig.produce()
        try:
            await rig.reach(collector, KILL_AT)
            await rig.kill(_busiest(collector.seen, ["c1", "c2"], pages=False), collector)
            await rig.reach(collector, FETCHER_KILL_AT)
            await rig.kill(_busiest(collector.seen, ["f1", "f2"], pages=True), collector)
        except TimeoutError:
            rig.note("deadline reached before every fault was played")
        return await rig.finish("roles", collector, failovers=2)


async def outage_scenario(site: HostSite, args: argparse.Namespace) -> Figures:
    async with contextlib.AsyncExitStack() as stack:
        broker = await _broker(stack)
        rig = await Rig.create(broker.bootstrap_servers, site, args)
        await rig.add_workers(stack, "solo")
        await rig.wait_group()
        collector = await stack.enter_async_context(collecting(rig.topics))
        await rig.produce()
        try:
            await rig.reach(collector, OUTAGE_AT)
            await broker.kill()
            down = rig.now()
            rig.note(f"broker killed ({rig.share_done(collector.seen):.0%} of URLs done)")
            await asyncio.sleep(args.outage)  # the scenario itself, not a wait for a condition
            rig.note("broker starting again")
            await broker.restart()
            done = rig.share_done(collector.seen)
            rig.note(
                f"broker serving again after {rig.now() - down:.0f} s ({done:.0%} of URLs done)"
            )
        except TimeoutError:
            rig.note("deadline reached before the outage")
        return await rig.finish("outage", collector, failovers=1)


async def churn_scenario(site: HostSite, args: argparse.Namespace) -> Figures:
    async with contextlib.AsyncExitStack() as stack:
        broker = await _broker(stack)
        count = max(args.requests, int(args.churn / CHURN_SPACING_S))
        rig = await Rig.create(broker.bootstrap_servers, site, args, requests=count)
        await rig.add_workers(stack, "c1", role="coordinator")
        await rig.add_workers(stack, "f1", "f2", role="fetcher", static=True)
        await rig.wait_group()
        collector = await stack.enter_async_context(collecting(rig.topics))
        producing = asyncio.create_task(rig.produce(spacing_s=args.churn / count))
        kills = 0
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            while (kills + 1) * args.churn_every < args.churn:
                due = began + (kills + 1) * args.churn_every
                await asyncio.sleep(max(due - loop.time(), 0))  # the scenario's schedule
                name = ("f1", "f2")[kills % 2]
                await rig.kill(name, collector)
                kills += 1
                await rig.add_workers(stack, name, role="fetcher", static=True, life=kills)
                rig.gone.discard(name)
        finally:
            await producing
        rig.note(f"{kills} fetcher kills, one every {args.churn_every:g} s")
        return await rig.finish("churn", collector, failovers=max(kills, 1))


def print_table(rows: list[tuple[str, str, Figures | str]]) -> None:
    head = (
        f"{'scenario':<34}{'results':>8}{'unique':>8}{'dups':>6}{'share':>8}"
        f"{'target':>8}{'today':>7}{'runs':>6}{'runs/req':>9}{'abandoned':>10}"
        f"{'re-runs/failover':>17}{'lost pages':>11}{'lost requests':>14}{'poison':>8}"
    )
    print(head)
    print("-" * len(head))
    for key, title, row in rows:
        if isinstance(row, str):
            print(f"{title:<34}  {row}")
            continue
        target, today = TARGETS[key]
        shown = "-" if today is None else format(today, ".0%")
        print(
            f"{title:<34}{row.results:>8}{row.unique:>8}{row.duplicates:>6}{row.share:>8.1%}"
            f"{'<=' + format(target, '.0%'):>8}{shown:>7}{row.runs:>6}"
            f"{row.runs_per_request:>9.2f}{row.abandoned:>10}{row.reruns_per_failover:>17.2f}"
            f"{row.lost_pages:>11}{row.lost_requests:>14}{row.poison:>8}"
        )
    print("target, today: the issue's duplicate share target, and its figure for today's code")
    print("dups: results beyond one per result_id; lost: URLs without a result, requests")
    print("without a terminal event (both must be 0); poison: quarantined pages (every page")
    print("here is innocent: must be 0)")
    for _, title, row in rows:
        if isinstance(row, Figures):
            met = "met" if row.share <= TARGETS[row.scenario][0] else "NOT met"
            if row.lost_pages or row.lost_requests:
                met += "; LOST work"
            if row.poison:
                met += "; innocent POISON"
            partial = "" if row.complete else "; INCOMPLETE at the deadline, figures partial"
            print(f"\n{title} (target {met}{partial}):")
            for line in row.notes:
                print(f"  {line}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=60, help="requests per scenario")
    parser.add_argument("--urls", type=int, default=5, help="URLs per request")
    parser.add_argument("--page-ms", type=int, default=2000, help="time each page takes")
    parser.add_argument("--hosts", type=int, default=8, help="hosts the URLs are spread over")
    parser.add_argument("--outage", type=float, default=60.0, help="broker outage, seconds")
    parser.add_argument(
        "--deadline", type=float, default=900.0, help="seconds per scenario, from the first request"
    )
    parser.add_argument(
        "--stall", type=float, default=180.0, help="give up after this long without any output"
    )
    parser.add_argument("--churn", type=float, default=300.0, help="churn scenario, seconds")
    parser.add_argument(
        "--churn-every", type=float, default=20.0, help="a fetcher killed every this many seconds"
    )
    parser.add_argument(
        "--scenario", choices=("all", "workers", "roles", "outage", "churn"), default="all"
    )
    return parser.parse_args()


async def main(args: argparse.Namespace) -> None:
    scenarios = [
        ("workers", "3 workers, kill/SIGTERM/join", workers_scenario),
        ("roles", "2+2 roles, kill coord. + fetcher", roles_scenario),
        ("outage", f"{args.outage:g} s broker outage", outage_scenario),
        ("churn", f"fetcher killed every {args.churn_every:g} s", churn_scenario),
    ]
    rows: list[tuple[str, str, Figures | str]] = []
    main_task = asyncio.current_task()
    if main_task is not None:  # SIGTERM unwinds like Ctrl-C: children are stopped on the way out
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    async with serve_hosts() as site:
        for key, title, scenario in scenarios:
            if args.scenario not in ("all", key):
                continue
            print(f"running: {title} ...", file=sys.stderr, flush=True)
            row: Figures | str
            try:
                row = await scenario(site, args)
            except Exception as exc:  # noqa: BLE001 - one scenario's failure still prints the other
                traceback.print_exc()
                row = f"failed: {exc!r}"
            left = sweep()
            if left and isinstance(row, Figures):
                row.notes.append(f"leftover processes after the scenario, killed: {left}")
            elif left:
                print(f"leftover processes after the scenario, killed: {left}", file=sys.stderr)
            rows.append((key, title, row))
    print(
        f"requests: {args.requests} x {args.urls} URLs of {args.page_ms} ms each,"
        f" over {args.hosts} hosts, {PARTITIONS} request and page partitions"
    )
    print_table(rows)


if __name__ == "__main__":
    os.environ[MARK_VARIABLE] = uuid.uuid4().hex
    try:
        asyncio.run(main(parse_args()))
    finally:
        sweep()
