"""What a run at its coordinator needs from the worker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from service.frontier.log import read_job

if TYPE_CHECKING:
    from service.contracts import FrontierRecord, PageTask, RecordSource
    from service.control import ControlReader
    from service.frontier.sitemap import TextSource
    from service.frontier.tail import FrontierTail
    from service.messaging.publisher import Publisher
    from service.metrics import Metrics
    from service.settings import Settings
    from service.worker.coordinator.placement import PagePartitions


class FrontierLog(Protocol):
    """Reads a request's frontier records (`service.frontier.log.read_job`)."""

    async def __call__(
        self,
        settings: Settings,
        request_id: str,
        source: RecordSource,
        *,
        since_ms: int,
        until: int | None = None,
    ) -> list[FrontierRecord]: ...


class LocalFetcher(Protocol):
    """This process's fetcher, as the coordinator sees it (`worker.fetcher.records.LocalLane`)."""

    def owns(self, key: str) -> bool: ...
    def room(self) -> int: ...
    async def room_opened(self, priority: int) -> None: ...
    def start(self, task: PageTask, owned: asyncio.Event) -> asyncio.Task[None]: ...
    async def recorded(self) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorDeps:
    """A run at its coordinator: plan, dispatch, learn outcomes, send events."""

    settings: Settings
    publisher: Publisher
    placement: PagePartitions
    """The page partition of each page key (the host directory, `placement.py`)."""
    metrics: Metrics
    control: ControlReader
    """The cancels read from the control topic."""
    tail: FrontierTail
    """The frontier records of the requests partitions owned here (page outcomes)."""
    sitemaps: TextSource
    """Fetches sitemaps (and robots.txt) through the egress proxy, for deep crawls."""
    local: LocalFetcher | None = None
    """This process's fetcher (role `all`): a task whose partition it owns skips the topic
    (one produce, one fetch and a commit less a page; ~9 ms less for a 1-URL request)."""
    frontier_log: FrontierLog = field(default=read_job)
    """Reads what earlier runs of a request logged (a redelivery, a deep crawl)."""
    dispatching: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while a run puts a batch of page tasks on the pages topic: one run's batch stays
    together on each host's partition instead of interleaving with every other run's (a
    fetcher that takes the next 48 records then serves a few runs, each with one browser
    context, not 30 at once)."""
