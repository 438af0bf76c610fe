"""In-memory stand-ins for what a run talks to: Kafka's producer, the frontier tail, the HTTP
fetcher, the browser, robots.txt, the control topic and the URL policy, and the builders of
the coordinator's and the fetcher's dependencies on them.

Unit tests of orchestration (the run, the fetcher, the outbox, the renderer) use these
(`pipeline.py` joins a coordinator and a fetcher through them); behaviour that
only real infrastructure shows (isolation, egress, kill -9, broker outages) stays in
`tests/integration`. As FastStream's `TestKafkaBroker` does, `InMemoryPublisher` keeps every
message it was given, by topic and in order, and `collected()` reads them back the way the
integration tests' `Collector` reads them from the broker, so both kinds of test assert on
the same `Collected`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from harness import Collected
from prometheus_client import CollectorRegistry

from service.browser import SettleLimits
from service.content.page import PageContent, failed
from service.contracts import ErrorCode, PageResult, ProgressEvent, utc_now
from service.control import Cancel
from service.egress.refusals import RefusedTargets
from service.http.robots import RobotsCache, RobotsFile
from service.http.static import StaticAnswer
from service.messaging.publisher import Delivery, Message
from service.metrics import Metrics
from service.paths import (
    BrowserPath,
    HostRenderMemory,
    PageRenderer,
    PageToRender,
    RunContexts,
)
from service.settings import Settings
from service.worker.coordinator.deps import CoordinatorDeps
from service.worker.coordinator.placement import Hashed
from service.worker.fetcher.deps import FetcherDeps
from service.worker.fetcher.scheduler import PageScheduler, SlotLimits

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from aiokafka import ConsumerRecord, TopicPartition

    Offsets = dict[TopicPartition, tuple[int, str]]

    from service.contracts import FrontierRecord, RecordSource
    from service.messaging.chunks import Headers

ROBOTS = """
User-agent: *
Disallow: /private/

User-agent: crawlstream
Allow: /no-crawlstream/except
Disallow: /no-crawlstream/
"""
"""The robots.txt `FakeRobotsSource` answers with unless told otherwise."""


@dataclass(frozen=True, slots=True)
class FixedGate:
    """An admission gate that admits up to `limit` pages at once, whatever the memory (the
    worker's own is `MemoryGate`; `enforce=False` is the same in production)."""

    limit: int

    def admit(self, in_flight: int) -> bool:
        return in_flight < self.limit


class PublisherProtocol(Protocol):
    """What the outbox needs of a producer (`service.messaging.publisher.Publisher`)."""

    @property
    def timeout_s(self) -> float: ...

    def messages(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes,
        headers: Headers | None = None,
        *,
        chunk_id: str | None = None,
        partition: int | None = None,
    ) -> list[Message]: ...

    async def send(self, message: Message) -> Delivery: ...


class InMemoryPublisher:
    """The publisher in memory: records what reached the "broker"; can fail chosen sends or
    deliveries once (or `always`), as a broker outage or a too-large message would."""

    timeout_s = 5.0

    def __init__(
        self,
        send_errors: dict[bytes, BaseException] | None = None,
        delivery_errors: dict[bytes, BaseException] | None = None,
        always: bool = False,
    ) -> None:
        self.send_errors = send_errors or {}
        self.delivery_errors = delivery_errors or {}
        self.always = always
        self.sends: Counter[bytes] = Counter()
        self.written: list[bytes] = []
        """Values the broker took, in the order it took them."""
        self.log: list[Message] = []
        """Messages the broker took, in order (all topics)."""
        self.listeners: list[Callable[[Message], None]] = []
        """Told of each message the broker took, as a subscriber of its topic would be."""

    def messages(
        self, topic, key, value, headers=None, *, chunk_id=None, partition=None
    ) -> list[Message]:
        del chunk_id  # one message per value here
        raw_key = key.encode() if isinstance(key, str) else key
        return [Message(topic, raw_key, value, list(headers or []), partition)]

    async def send(self, message: Message) -> Delivery:
        self.sends[message.value] += 1
        first = self.sends[message.value] == 1
        if message.value in self.send_errors and (first or self.always):
            raise self.send_errors[message.value]
        delivery: Delivery = asyncio.get_running_loop().create_future()
        if message.value in self.delivery_errors and (first or self.always):
            delivery.set_exception(self.delivery_errors[message.value])
        else:
            self.written.append(message.value)
            self.log.append(message)
            delivery.set_result(None)
            for listener in self.listeners:
                listener(message)
        return delivery

    def collected(self, settings: Settings) -> Collected:
        """Results and progress events as a reader of those topics would see them."""
        seen = Collected()
        for message in self.log:
            key = (message.key or b"").decode()
            seen.keys.setdefault(key, set()).add((message.topic, 0))
            if message.topic == settings.progress_topic:
                seen.events.append((ProgressEvent.model_validate_json(message.value), 0))
            elif message.topic == settings.results_topic:
                seen.results.append((PageResult.model_validate_json(message.value), 0))
        return seen


def answer(
    url: str,
    body: str = "",
    *,
    kind: str = "html",
    status: int = 200,
    retry_after: str | None = None,
) -> StaticAnswer:
    """What `StaticFetcher` would return for `url`."""
    return StaticAnswer(
        url=url,
        status=status,
        media_type={"html": "text/html", "text": "text/plain"}.get(kind, "application/pdf"),
        kind=kind,  # type: ignore[arg-type]
        body=body,
        truncated=False,
        retry_after=retry_after,
        attachment=False,
    )


class FakeFetcher:
    """Answers every fetch with the next of `answers` (the last one again once they run out)."""

    def __init__(self, *answers: StaticAnswer | PageContent) -> None:
        self.answers = list(answers)
        self.fetched = 0

    async def fetch(self, url: str, *, timeout_s: float, max_bytes: int, identity=None):  # noqa: ARG002
        self.fetched += 1
        self.identity = identity
        return self.answers[min(self.fetched, len(self.answers)) - 1]


class FakeSite:
    """A fetcher that serves a site in memory: `pages` by URL (an article by default); pages
    whose URL contains `hanging` never answer, so they time out as the real fetcher's would,
    unless cancelled first. `hits` counts fetches by URL, `started` is set by the first fetch
    and `closed` lists the fetches that were cancelled, once they have closed: with
    `slow_close`, a cancelled fetch takes until that event is set to close (as a page in a
    loaded Chromium can take seconds)."""

    def __init__(
        self,
        pages: dict[str, StaticAnswer | list[StaticAnswer]] | None = None,
        *,
        hanging: str | None = None,
        slow_close: asyncio.Event | None = None,
    ) -> None:
        self.pages = pages or {}
        self.hanging = hanging
        self.slow_close = slow_close
        self.hits: Counter[str] = Counter()
        self.started = asyncio.Event()
        self.closed: list[str] = []

    async def fetch(self, url: str, *, timeout_s: float, max_bytes: int, identity=None):  # noqa: ARG002
        self.hits[url] += 1
        self.started.set()
        if self.hanging is not None and self.hanging in url:
            try:
                await asyncio.sleep(timeout_s)
            except asyncio.CancelledError:
                if self.slow_close is not None:
                    await self.slow_close.wait()
                self.closed.append(url)
                raise
            return failed(ErrorCode.TIMEOUT, f"page did not finish within {timeout_s:.1f} s")
        found = self.pages.get(url)
        if isinstance(found, list):
            return found[min(self.hits[url], len(found)) - 1]
        if found is not None:
            return found
        return answer(url, f"<html><title>{url}</title><body><h1>Page at {url}</h1></body></html>")


class FakeBrowser:
    """The browser path of a page: records each call's timeout, answers with one page."""

    def __init__(self, url: str = "http://site.test/a") -> None:
        self.url = url
        self.calls: list[float] = []
        self.pages: list[PageToRender] = []

    async def render(self, page: PageToRender, timeout_s: float) -> PageContent:
        self.pages.append(page)
        self.calls.append(timeout_s)
        return PageContent(
            ok=True, final_url=self.url, status_code=200, markdown="from the browser"
        )


class FakeRobotsSource:
    """Answers from a table by robots.txt URL (`ROBOTS` by default); counts the fetches; can
    hold them until `gate` is set."""

    def __init__(self, answers: dict[str, RobotsFile] | None = None) -> None:
        self.answers = answers or {}
        self.fetched: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def fetch(self, url: str) -> RobotsFile:
        self.fetched.append(url)
        await self.gate.wait()
        return self.answers.get(url, RobotsFile(status=200, text=ROBOTS))


class FakeControl:
    """The control topic in memory: the cancels produced so far, by request_id."""

    def __init__(self) -> None:
        self.cancels: dict[str, Cancel] = {}
        self.listeners: list[Callable[[Cancel], object]] = []
        """Told of each cancel at once, as the control reader tells the `CancelRegistry`."""

    def cancel(self, request_id: str, reason: str | None = None) -> Cancel:
        made = Cancel(request_id=request_id, reason=reason, at=utc_now())
        self.cancels[request_id] = made
        for listener in self.listeners:
            listener(made)
        return made

    def known_cancel(self, request_id: str) -> Cancel | None:
        return self.cancels.get(request_id)


class OpenPolicy:
    """A URL policy that lets every target through (the policy has its own tests)."""

    async def check_target(self, url: str) -> list[object]:  # noqa: ARG002
        return []


class NoBrowserPool:
    """A pool for runs whose pages take the HTTP path: asking it for a browser is a bug."""

    open_pages = 0

    async def open_context(self, options: object) -> object:
        raise AssertionError(f"this test renders over HTTP; a browser was asked for {options}")


class InMemoryTail:
    """The frontier tail in memory (`service.frontier.tail.FrontierTail`'s `subscribe` and
    `unsubscribe`): one log of the frontier records written so far; each record appended is
    handed to the subscribers of its request, and `read_job` replays the log up to the
    position `subscribe` returned, as `CoordinatorDeps.frontier_log`."""

    def __init__(self) -> None:
        self.records: list[FrontierRecord] = []
        self._subscribers: dict[str, list[Callable[[FrontierRecord], None]]] = {}

    async def subscribe(self, request_id: str, deliver: Callable[[FrontierRecord], None]) -> int:
        self._subscribers.setdefault(request_id, []).append(deliver)
        return len(self.records)

    def unsubscribe(self, request_id: str, deliver: Callable[[FrontierRecord], None]) -> None:
        subscribers = self._subscribers.get(request_id, [])
        if deliver in subscribers:
            subscribers.remove(deliver)
        if not subscribers:
            self._subscribers.pop(request_id, None)

    def subscribed(self, request_id: str) -> int:
        return len(self._subscribers.get(request_id, []))

    def offer(self, record: FrontierRecord) -> None:
        """A record the fetcher of this process hands its coordinator before the broker has
        it (role `all`); the copy written later comes through `append`."""
        for deliver in list(self._subscribers.get(record.request_id, [])):
            deliver(record)

    def append(self, record: FrontierRecord) -> None:
        self.records.append(record)
        for deliver in list(self._subscribers.get(record.request_id, [])):
            deliver(record)

    async def read_job(
        self,
        settings: Settings,  # noqa: ARG002
        request_id: str,
        source: RecordSource,
        *,
        since_ms: int,  # noqa: ARG002
        until: int | None = None,
    ) -> list[FrontierRecord]:
        """The records of the job answering `source` below position `until`, in order."""
        records = self.records if until is None else self.records[:until]
        return [r for r in records if r.request_id == request_id and r.source == source]


def coordinator_deps(
    *,
    publisher: InMemoryPublisher | None = None,
    control: FakeControl | None = None,
    tail: InMemoryTail | None = None,
    sitemaps: FakeRobotsSource | None = None,
    settings: Settings | None = None,
    metrics: Metrics | None = None,
) -> CoordinatorDeps:
    """A coordinator's dependencies: Kafka (publisher, control, frontier tail and log) and
    the sitemap source in memory."""
    tail = tail or InMemoryTail()
    settings = settings or Settings(worker_name="unit")
    return CoordinatorDeps(
        settings=settings,
        publisher=publisher or InMemoryPublisher(),  # type: ignore[arg-type]
        placement=Hashed(settings.page_partitions),
        metrics=metrics or Metrics(CollectorRegistry()),
        control=control or FakeControl(),  # type: ignore[arg-type]
        tail=tail,  # type: ignore[arg-type]
        sitemaps=sitemaps or FakeRobotsSource(),  # type: ignore[arg-type]
        frontier_log=tail.read_job,
    )


def fetcher_deps(
    fetcher: object,
    *,
    publisher: InMemoryPublisher | None = None,
    robots: FakeRobotsSource | None = None,
    control: FakeControl | None = None,
    settings: Settings | None = None,
    metrics: Metrics | None = None,
    slots: int | None = None,
) -> FetcherDeps:
    """A fetcher's dependencies with the real scheduler, renderer (its HTTP path on
    `fetcher`), robots cache and metrics, and what would talk to Kafka, a browser or the
    network in memory."""
    settings = settings or Settings(worker_name="unit")
    metrics = metrics or Metrics(CollectorRegistry())
    contexts = RunContexts(NoBrowserPool())  # type: ignore[arg-type]
    browser = BrowserPath(contexts, metrics, refusals=None, settle=SettleLimits())
    return FetcherDeps(
        settings=settings,
        publisher=publisher or InMemoryPublisher(),  # type: ignore[arg-type]
        metrics=metrics,
        control=control or FakeControl(),  # type: ignore[arg-type]
        pool=NoBrowserPool(),  # type: ignore[arg-type]
        scheduler=PageScheduler(
            FixedGate(slots or settings.max_page_slots), SlotLimits.from_settings(settings)
        ),
        policy=OpenPolicy(),  # type: ignore[arg-type]
        robots=RobotsCache(robots or FakeRobotsSource()),
        refusals=RefusedTargets(),
        renderer=PageRenderer(fetcher, browser, HostRenderMemory(), metrics),  # type: ignore[arg-type]
        contexts=contexts,
    )


class FakeKafkaConsumer:
    """What `RecordConsumer` and `HostDirectory` ask of their Kafka consumer, in memory
    (pass `client=consumer.factory`): an assignment, pausing, high watermarks, and commits
    that a test may hold (`commit_hook`). Records put in `log` are handed out from each
    partition's position, which moves past them as aiokafka's does (`seek` sets it);
    `coordinator` answers the committed offsets a rebalance asks for."""

    def __init__(self, assigned: Iterable[TopicPartition] = ()) -> None:
        self.assigned = set(assigned)
        self.held: set[TopicPartition] = set()
        self.watermarks: dict[int, int | None] = {}
        self.commit_hook: (
            Callable[[dict[TopicPartition, tuple[int, str]]], Awaitable[None]] | None
        ) = None
        self.options: dict[str, object] = {}
        self.log: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        self.positions: dict[TopicPartition, int] = {}
        self.handed_out: list[tuple[TopicPartition, int]] = []
        """Every record `getmany` answered with, in order."""
        self.during_poll: Callable[[], None] | None = None
        """Called inside each `getmany` before it answers (a rebalance landing meanwhile)."""
        self.polls: list[int] = []
        """The `timeout_ms` of each `getmany`, in order (it answers at once)."""
        self.rebalanced = asyncio.Event()
        """Clear while a rebalance is in progress: `getmany` then waits for it, whatever its
        `timeout_ms`, as aiokafka's does (`wait_for_assignment`)."""
        self.rebalanced.set()
        self.ends_asked: list[set[TopicPartition]] = []
        """The partitions of each `end_offsets`, in order (it answers after one turn of the
        event loop: their ends in `log`)."""
        self._coordinator = FakeGroupCoordinator()

    @property
    def coordinator(self) -> FakeGroupCoordinator:
        return self._coordinator

    def factory(self, **options: object) -> FakeKafkaConsumer:
        self.options = options
        return self

    async def start(self) -> None:
        self.polls = []

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        self.assigned = set(tps)

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 0)

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        asked = set(tps)
        self.ends_asked.append(asked)
        await asyncio.sleep(0)
        return {tp: max((r.offset + 1 for r in self.log.get(tp, ())), default=0) for tp in asked}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def position(self, tp: TopicPartition) -> int:
        return self.positions.get(tp, 0)

    async def getmany(
        self, *tps: TopicPartition, timeout_ms: int, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        """The records of `tps` (none named: every assigned partition not paused) from
        their positions, at most `max_records`."""
        self.polls.append(timeout_ms)
        await asyncio.sleep(0)
        await self.rebalanced.wait()
        if self.during_poll is not None:
            self.during_poll()
        left = max_records if max_records is not None else 1_000_000
        batch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]] = {}
        for tp in tps or tuple(self.assigned - self.held):
            position = self.positions.get(tp, 0)
            records = [r for r in self.log.get(tp, ()) if r.offset >= position][:left]
            if records:
                batch[tp] = records
                self.positions[tp] = records[-1].offset + 1
                self.handed_out.extend((tp, record.offset) for record in records)
                left -= len(records)
        return batch

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def paused(self) -> set[TopicPartition]:
        return set(self.held)

    def pause(self, *tps: TopicPartition) -> None:
        self.held.update(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self.held.difference_update(tps)

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.watermarks.get(tp.partition)

    async def commit(self, offsets: Offsets) -> None:
        if self.commit_hook is not None:
            await self.commit_hook(offsets)

    async def stop(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _Committed:
    offset: int
    metadata: str


class FakeGroupCoordinator:
    """The group coordinator a rebalance asks for committed offsets (`committed`; -1: none);
    a test may hold its answer (`answering` cleared) to act while the rebalance waits."""

    def __init__(self) -> None:
        self.generation = 1
        self.committed: dict[TopicPartition, int] = {}
        self.answering = asyncio.Event()
        self.answering.set()
        self.asked = asyncio.Event()

    async def fetch_committed_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, _Committed]:
        self.asked.set()
        await self.answering.wait()
        return {tp: _Committed(self.committed.get(tp, -1), "") for tp in partitions}
