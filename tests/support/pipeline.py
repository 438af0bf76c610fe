"""A coordinator and a fetcher joined in memory, as FastStream's `TestKafkaBroker` joins a
publisher to its subscribers: what the coordinator puts on the pages topic is handed (as a
`ConsumerRecord` with its partition, offset, key, headers and timestamp) to a real
`Fetcher.handle`, and what anyone writes to the frontier topic reaches the frontier tail's
subscribers and stays in its log for the next run's replay.

Everything else is real: the run and its plans, the scheduler, the renderer (HTTP path, on
`FakeSite`), the robots cache, the outbox. Page records may be held (`holding`) and released
in any order, as partitions of several fetchers would answer them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from typing import TYPE_CHECKING, Final

from aiokafka.structs import ConsumerRecord
from inmemory import (
    FakeControl,
    FakeRobotsSource,
    InMemoryPublisher,
    InMemoryTail,
    coordinator_deps,
    fetcher_deps,
)
from prometheus_client import CollectorRegistry

from service.contracts import FrontierRecord, PageTask, RecordSource, dump
from service.control import ActiveRuns
from service.messaging.offsets import Delivery, Verdict
from service.messaging.publisher import JSON_HEADERS
from service.messaging.seal import Seal
from service.messaging.topics import partition_for
from service.metrics import Metrics
from service.settings import Settings
from service.worker.coordinator.run import Run
from service.worker.fetcher.lane import LocalLane
from service.worker.fetcher.records import Fetcher

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Collected

    from service.contracts import CrawlRequest
    from service.messaging.publisher import Message
    from service.worker.fetcher.scheduler import PageScheduler

SOURCE: Final = RecordSource(topic="requests", partition=0, offset=0)

RUN_DEADLINE_S: Final = 5.0
"""A run on in-memory fakes takes milliseconds; one that takes this long is stuck."""

FIRST_DELIVERY: Final = Delivery(Verdict.RUN, 1)

Record = ConsumerRecord[bytes, bytes]


class Pipeline:
    """One worker of role `all` in memory: a coordinator's runs, a fetcher, the topics
    between them. `tasks` lists the page tasks dispatched, in order; `peak` the most pages
    of one (run, page key) dispatched and not yet answered at once."""

    def __init__(
        self,
        site: object,
        *,
        robots: FakeRobotsSource | None = None,
        settings: Settings | None = None,
        slots: int | None = None,
        local: Callable[[str], bool] | None = None,
        local_paused: Callable[[], bool] = lambda: False,
    ) -> None:
        self.settings = settings or Settings(worker_name="unit")
        self.publisher = InMemoryPublisher()
        self.control = FakeControl()
        self.tail = InMemoryTail()
        self.active = ActiveRuns()
        self.control.listeners.append(self.active.cancel)
        metrics = Metrics(CollectorRegistry())
        robots = robots or FakeRobotsSource()
        shared = {"publisher": self.publisher, "control": self.control, "metrics": metrics}
        self.coordinator = coordinator_deps(
            tail=self.tail, sitemaps=robots, settings=self.settings, **shared
        )
        self.fetcher_deps = fetcher_deps(
            site, robots=robots, settings=self.settings, slots=slots, **shared
        )
        self.charged: list[Record] = []
        """Page records whose render began (the fetcher charged their delivery)."""
        self.uncharged: list[Record] = []
        """Page records whose render ended (the fetcher relieved their delivery)."""
        self.aside: set[tuple[int, int]] = set()
        """Page records (partition, offset) set aside now: waiting for their host's pace."""
        self.fetcher = Fetcher(
            self.fetcher_deps,
            self.active,
            _Deliveries(self),
            local_tail=self.tail if local is not None else None,  # type: ignore[arg-type]
        )
        self.lane: LocalLane | None = None
        """With `local` (which page keys this process's fetcher owns): the coordinator
        hands those pages to the fetcher directly, as in a worker of role `all`."""
        if local is not None:
            self.lane = LocalLane(self.fetcher, owns=local, paused=local_paused)
            self.coordinator = dataclasses.replace(self.coordinator, local=self.lane)
        self.owned = asyncio.Event()
        self.owned.set()
        self.tasks: list[PageTask] = []
        self.deliveries: dict[str, Delivery] = {}
        """URL -> the delivery its page record gets (the first, unless told otherwise)."""
        self.holding: Callable[[PageTask], bool] = lambda _task: False
        """Which page records wait in `held` instead of going to the fetcher."""
        self.held: list[Record] = []
        self.relieved: list[str] = []
        """Runs that told their request record it may no longer be charged."""
        self.peak: Counter[tuple[str, str]] = Counter()
        self._unfinished: Counter[tuple[str, str]] = Counter()
        self._keys: dict[tuple[str, str], str] = {}
        self._offsets: Counter[int] = Counter()
        self._requests: dict[str, str] = {}
        self._handling: set[asyncio.Task[None]] = set()
        self.publisher.listeners.append(self._route)

    async def _relieved(self, run_id: str) -> None:
        self.relieved.append(run_id)

    @property
    def scheduler(self) -> PageScheduler:
        return self.fetcher_deps.scheduler

    def collected(self) -> Collected:
        return self.publisher.collected(self.settings)

    def run(self, request: CrawlRequest, *, earlier: bool = False, priority: int = 0) -> Run:
        """A run of `request` at the coordinator (a redelivered record: `earlier`)."""
        run = Run(
            self.coordinator,
            request,
            source=SOURCE,
            priority=priority,
            earlier=earlier,
            relieve=lambda: self._relieved(run.run_id),
        )
        self._requests[run.run_id] = request.request_id
        return run

    async def execute(self, run: Run) -> None:
        """Run to its terminal event, reachable by cancels as the worker's runs are."""
        with self.active.running(self._requests[run.run_id], run):
            async with asyncio.timeout(RUN_DEADLINE_S):
                await run.execute()

    def cancel(self, request_id: str, reason: str | None = None) -> None:
        """A cancel read from the control topic: it reaches the runs and the pages here."""
        self.control.cancel(request_id, reason)

    async def page(self, task: PageTask, delivery: Delivery = FIRST_DELIVERY) -> None:
        """Hand one page record to the fetcher directly and wait for its end."""
        await self.fetcher.handle(self.record(task.url, dump(task)), delivery, self.owned)

    def release(self, *, where: Callable[[PageTask], bool] | None = None) -> int:
        """Hand the held page records `where` allows to the fetcher, in the order held."""
        kept: list[Record] = []
        released = 0
        for record in list(self.held):
            task = PageTask.model_validate_json(record.value or b"")
            if where is None or where(task):
                self._hand(record, task)
                released += 1
            else:
                kept.append(record)
        self.held = kept
        return released

    async def drained(self) -> None:
        """Wait until every page record handed to the fetcher was taken to its end."""
        async with asyncio.timeout(RUN_DEADLINE_S):
            while self._handling:
                await asyncio.gather(*self._handling)

    async def close(self) -> None:
        """Stop what still runs (pages of a run the test gave up on)."""
        for task in self._handling:
            task.cancel()
        await asyncio.gather(*self._handling, return_exceptions=True)
        if self.lane is not None:
            await self.lane.close()
        await self.fetcher.close()

    def answered(self, url: str) -> bool:
        """A fetcher wrote the `page` record of `url` (any run)."""
        return any(r.kind == "page" and r.url == url for r in self.tail.records)

    def _route(self, message: Message) -> None:
        if message.topic == self.settings.pages_topic:
            task = PageTask.model_validate_json(message.value)
            self._dispatched(task, (message.key or b"").decode())
            record = self.record((message.key or b"").decode(), message.value, message.headers)
            if self.holding(task):
                self.held.append(record)
            else:
                self._hand(record, task)
        elif message.topic == self.settings.frontier_topic:
            frontier = FrontierRecord.model_validate_json(message.value)
            if frontier.kind == "page" and frontier.run_id and frontier.url:
                key = self._keys.pop((frontier.run_id, frontier.url), None)
                if key is not None:
                    self._unfinished[(frontier.run_id, key)] -= 1
            self.tail.append(frontier)

    def _dispatched(self, task: PageTask, key: str) -> None:
        self.tasks.append(task)
        self._keys[(task.run_id, task.url)] = key
        window = (task.run_id, key)
        self._unfinished[window] += 1
        self.peak[window] = max(self.peak[window], self._unfinished[window])

    def record(
        self,
        key: str,
        value: bytes,
        headers: list[tuple[str, bytes]] | None = None,
        *,
        sealed: bool = True,
    ) -> Record:
        """A page record as a coordinator of the deployment writes it (`sealed`: with its
        deployment and tag headers, as the real publisher adds them)."""
        headers = list(headers or JSON_HEADERS)
        if sealed:
            topic = self.settings.pages_topic
            headers += Seal.from_settings(self.settings).headers(topic, key.encode(), value)
        partition = partition_for(key, self.settings.page_partitions)
        offset = self._offsets[partition]
        self._offsets[partition] += 1
        return ConsumerRecord(
            topic=self.settings.pages_topic,
            partition=partition,
            offset=offset,
            timestamp=int(time.time() * 1000),
            timestamp_type=0,
            key=key.encode(),
            value=value,
            checksum=None,
            serialized_key_size=len(key),
            serialized_value_size=len(value),
            headers=tuple(headers),
        )

    def _hand(self, record: Record, task: PageTask) -> None:
        delivery = self.deliveries.get(task.url, FIRST_DELIVERY)
        handled = asyncio.create_task(self.fetcher.handle(record, delivery, self.owned))
        self._handling.add(handled)
        handled.add_done_callback(self._handling.discard)


class _Deliveries:
    """The pages consumer's charge and relieve, recorded."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    async def charge(self, record: Record, *, alone: bool) -> None:
        del alone
        self._pipeline.charged.append(record)

    def relieve(self, record: Record) -> None:
        self._pipeline.uncharged.append(record)

    def set_aside(self, record: Record) -> None:
        self._pipeline.aside.add((record.partition, record.offset))

    def taken_back(self, record: Record) -> None:
        self._pipeline.aside.discard((record.partition, record.offset))
