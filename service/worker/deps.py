"""What the two roles need from the worker, one bundle each."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from service.frontier.log import read_job

if TYPE_CHECKING:
    from service.browser.pool import BrowserPool
    from service.cache import PageCache
    from service.contracts import FrontierRecord, PageTask, RecordSource
    from service.control import ControlReader
    from service.egress.refusals import RefusedTargets
    from service.frontier.sitemap import TextSource
    from service.frontier.tail import FrontierTail
    from service.http.robots import RobotsCache
    from service.http.static import StaticFetcher
    from service.messaging.publisher import Publisher
    from service.messaging.seal import Seal
    from service.metrics import Metrics
    from service.net.policy import UrlPolicy
    from service.paths import PageRenderer
    from service.settings import Settings
    from service.worker.placement import PagePartitions
    from service.worker.scheduler import PageScheduler


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
    """This process's fetcher, as the coordinator sees it (`fetcher.LocalLane`)."""

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


@dataclass(frozen=True, slots=True, kw_only=True)
class FetcherDeps:
    """A page at its fetcher: policy, robots, pacing, retries, a slot, a render."""

    settings: Settings
    publisher: Publisher
    metrics: Metrics
    control: ControlReader
    pool: BrowserPool
    scheduler: PageScheduler
    """Page slots: memory admission, each run's share, the per-host limit."""
    policy: UrlPolicy
    robots: RobotsCache
    """robots.txt rules per origin, fetched through the egress proxy: one fetch per
    origin and TTL for the whole group, since one fetcher owns each host."""
    refusals: RefusedTargets
    """Targets the egress proxy refused, so a refused https page is `blocked`."""
    renderer: PageRenderer
    """Picks each page's path (`render`: browser, http, auto) and runs it."""
    cache: PageCache | None = None
    """The page cache of the hosts this fetcher owns (None: every page is fetched)."""
    static: StaticFetcher | None = None
    """The HTTP client through the egress proxy, for the cache's conditional requests."""
    seal: Seal | None = None
    """Checks that a page record is this deployment's and authentic (None: one from the
    settings, counting nowhere)."""
