"""What a page at its fetcher needs from the worker, and what its records read of the
settings (`FetcherLimits`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.browser.pool import BrowserPool
    from service.cache import PageCache
    from service.changes import ChangeTracker
    from service.control import ControlReader
    from service.egress.refusals import RefusedTargets
    from service.http.robots import RobotsCache
    from service.http.static import StaticFetcher
    from service.messaging.publisher import Publisher
    from service.messaging.seal import Seal
    from service.metrics import Metrics
    from service.net.policy import UrlPolicy
    from service.paths import PageRenderer, RunContexts
    from service.settings import Settings
    from service.worker.fetcher.scheduler import PageScheduler


@dataclass(frozen=True, slots=True, kw_only=True)
class FetcherLimits:
    """What a fetcher's page records read of the settings, read once."""

    results_topic: str
    frontier_topic: str
    max_deliveries: int
    max_page_slots: int
    """A partition with this many pages waiting here is read no further for now."""
    max_queued_pages: int
    max_request_deadline_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> FetcherLimits:
        return cls(
            results_topic=settings.results_topic,
            frontier_topic=settings.frontier_topic,
            max_deliveries=settings.max_deliveries,
            max_page_slots=settings.max_page_slots,
            max_queued_pages=settings.max_queued_pages,
            max_request_deadline_s=settings.max_request_deadline.total_seconds(),
        )


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
    contexts: RunContexts
    """Each run's browser context here, held from a page's start to its result."""
    cache: PageCache | None = None
    """The page cache of the hosts this fetcher owns (None: every page is fetched)."""
    static: StaticFetcher | None = None
    """The HTTP client through the egress proxy, for the cache's conditional requests."""
    changes: ChangeTracker | None = None
    """Compares tracked pages with their history and publishes changes (None: no tracking)."""
    seal: Seal | None = None
    """Checks that a page record is this deployment's and authentic (None: one from the
    settings, counting nowhere)."""
