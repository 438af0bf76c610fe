"""What a request run needs from the worker, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.control import ControlReader
    from service.crawling.browser import BrowserPool
    from service.crawling.refusals import RefusedTargets
    from service.crawling.robots import RobotsCache
    from service.crawling.url_policy import UrlPolicy
    from service.frontier.sitemap import TextSource
    from service.messaging.publisher import Publisher
    from service.metrics import Metrics
    from service.rendering import PageRenderer
    from service.settings import Settings
    from service.worker.scheduler import PageScheduler


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerDeps:
    settings: Settings
    publisher: Publisher
    pool: BrowserPool
    scheduler: PageScheduler
    """Page slots: memory admission, each request's share, the per-host limit."""
    policy: UrlPolicy
    metrics: Metrics
    robots: RobotsCache
    """robots.txt rules per origin, fetched through the egress proxy."""
    control: ControlReader
    """The cancels read from the control topic."""
    refusals: RefusedTargets
    """Targets the egress proxy refused, so a refused https page is `blocked`."""
    sitemaps: TextSource
    """Fetches sitemaps (and robots.txt) through the egress proxy, for deep crawls."""
    renderer: PageRenderer
    """Picks each page's path (`render`: browser, http, auto) and runs it."""
