"""What a request run needs from the worker, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.browser.pool import BrowserPool
    from service.control import ControlReader
    from service.egress.refusals import RefusedTargets
    from service.frontier.sitemap import TextSource
    from service.http.robots import RobotsCache
    from service.messaging.publisher import Publisher
    from service.metrics import Metrics
    from service.net.policy import UrlPolicy
    from service.paths import PageRenderer
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
