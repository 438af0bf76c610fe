"""One run of a deep crawl: pages render as soon as they are admitted; links are folded into
the plan in admission order; the frontier topic keeps what a next owner needs.

Per finished page, in this order: its result is published and acknowledged, then its
frontier record (outcome and candidate links) is written. A run that takes a job over
replays the job's records first: pages with a record are not rendered again (their counts
and links are taken from the record), pages without one are rendered (again, perhaps: same
`result_id`). The plan reaches the same decisions either way (see `service.frontier.plan`).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final, TypeAlias

from service.content.extract import FollowRules
from service.contracts import ErrorCode, FrontierRecord
from service.frontier.log import read_job
from service.frontier.plan import CrawlPlan, Expansion, SitemapPages
from service.frontier.sitemap import sitemap_urls
from service.logs import get_logger
from service.net.hosts import host_key
from service.worker.run import RequestRun

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from service.content.page import PageContent
    from service.contracts import CrawlRequest, CrawlSpec, PageResult, RecordSource
    from service.frontier.plan import Admitted
    from service.worker.deps import WorkerDeps
    from service.worker.retry import PageDeadline

log = get_logger(__name__)

OUTCOMES: Final = {True: "succeeded", False: "failed"}

LINKS_ON_LOOP: Final = 50
"""Links of a page filtered on the event loop; more go to a thread."""

WINDOW_PER_SLOT: Final = 2
"""Pages of one deep crawl started and unfinished at once, per page slot of the worker
(`CRAWL_MAX_PAGE_SLOTS`): enough to keep every slot busy with a page waiting behind it;
the crawl's other admitted pages stay in its plan (rebuilt from the frontier log), not in
the scheduler, until the window has room."""

_Running: TypeAlias = "dict[asyncio.Task[tuple[PageResult, PageContent]], str]"
"""Pages rendering now -> their URLs."""


class HostPacer:
    """Spaces the starts of one crawl's pages of a host by `delay_s` (`crawl.delay_ms`)."""

    def __init__(
        self,
        delay_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._delay_s = delay_s
        self._clock = clock
        self._sleep = sleep
        self._next: dict[str, float] = {}

    async def turn(self, host: str) -> None:
        """Return when a page of `host` may start: `delay_s` after the previous one's turn."""
        if self._delay_s <= 0:
            return
        now = self._clock()
        start = max(now, self._next.get(host, now))
        self._next[host] = start + self._delay_s
        if start > now:
            await self._sleep(start - now)


class DeepCrawlRun(RequestRun):
    """A request with `crawl`: the seeds, then what their links lead to, within the budget."""

    def __init__(
        self,
        deps: WorkerDeps,
        request: CrawlRequest,
        *,
        source: RecordSource,
        priority: int = 0,
        owned: asyncio.Event | None = None,
        since_ms: int = 0,
    ) -> None:
        super().__init__(
            deps, request, source=source, priority=priority, owned=owned, since_ms=since_ms
        )
        spec = self._spec
        self._plan = CrawlPlan(spec, request.urls)
        self._follow = FollowRules(respect_nofollow=spec.respect_nofollow)
        self._pacer = HostPacer(spec.delay_ms / 1000)
        self._outputs.total = len(self._plan.admitted)
        self._outputs.discovered = self._plan.discovered
        self._window = WINDOW_PER_SLOT * deps.settings.max_page_slots
        """Pages of this crawl started and unfinished at most (`WINDOW_PER_SLOT`)."""
        self._counted = {page.url for page in self._plan.admitted[: self._window]}
        """Seeds `execute` put in the scheduler's count and not yet started."""
        self._logged_sitemap: SitemapPages | None = None
        """The sitemap's pages as an earlier run of the job logged them (`_replay`)."""

    @property
    def _spec(self) -> CrawlSpec:
        spec = self._request.crawl
        if spec is None:
            raise RuntimeError("a deep crawl run needs `crawl`")
        return spec

    def _urls(self) -> list[str]:
        return [page.url for page in self._plan.admitted]

    def _counted_at_start(self) -> int:
        """The seeds the window starts with: the others wait in the plan."""
        return len(self._counted)

    def _placement(self, url: str) -> tuple[int, str | None]:
        page = self._plan.admitted[self._plan.index_of(url)]
        return page.depth, page.parent_url

    def _completion(self) -> str:
        plan = self._plan
        pages = len(plan.admitted)
        if plan.full and plan.discovered > pages:
            return f"budget spent: max_pages {plan.max_pages} reached, {plan.discovered} discovered"
        return f"frontier exhausted: {pages} pages, {plan.discovered} discovered"

    async def _crawl_all(self) -> None:
        if self._stopped.is_set():
            return
        replay = await self._replay()
        running: _Running = {}
        async with asyncio.TaskGroup() as group:
            waiting = list(self._plan.admitted)
            sitemap = group.create_task(self._sitemap()) if self._spec.sitemap else None
            stopped = group.create_task(self._stopped.wait())
            while waiting or running or sitemap is not None:
                while waiting and len(running) < self._window:
                    waiting += self._start(waiting.pop(0), replay, running, group)
                if not running and sitemap is None:
                    break
                await asyncio.wait(
                    {*running, stopped, *([sitemap] if sitemap else [])},
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if sitemap is not None and sitemap.done():
                    pages = sitemap.result()
                    waiting += self._plan.add_sitemap(pages.links, left_out=pages.left_out)
                    sitemap = None
                waiting += await self._take_finished(running)
                if stopped.done():
                    break
            for other in (*running, stopped, *([sitemap] if sitemap else [])):
                other.cancel()
        for page, url in running.items():  # finished before it could be cancelled
            if not page.cancelled():
                await self._finished(url, *page.result())

    async def _take_finished(self, running: _Running) -> list[Admitted]:
        admitted: list[Admitted] = []
        for page in [task for task in running if task.done()]:
            url = running.pop(page)
            admitted += await self._finished(url, *page.result())
        return admitted

    def _start(
        self,
        page: Admitted,
        replay: dict[str, FrontierRecord],
        running: _Running,
        group: asyncio.TaskGroup,
    ) -> list[Admitted]:
        """Render an admitted page, or take it from the replay when an earlier run did it.
        Returns the pages that taking one from the replay admitted."""
        self._outputs.total = len(self._plan.admitted)
        counted = page.url in self._counted  # in the scheduler's backlog since `execute`
        self._counted.discard(page.url)
        done = replay.pop(page.url, None)
        if done is not None:
            if counted:
                self._deps.scheduler.finished()
                self._pending -= 1
            self._outputs.count(done.outcome or "failed")
            self._published.add(page.url)
            return self._plan.expanded(page.url, Expansion(done.links, done.canonical))
        if not counted:
            self._deps.scheduler.accept(1)
            self._pending += 1
        running[group.create_task(self._page_content(page.url))] = page.url
        return []

    async def _finished(self, url: str, result: PageResult, content: PageContent) -> list[Admitted]:
        """Publish a page; once acknowledged, log its links; fold them into the plan."""
        await self._publish(result)
        self._deps.scheduler.finished()
        self._pending -= 1
        await self._outputs.acknowledged()
        plan = self._plan
        outlinks = content.outlinks if result.ok else None
        links = outlinks.links if outlinks else ()
        if len(links) > LINKS_ON_LOOP:  # normalising and matching cost ~0.1 ms a link
            candidates = await asyncio.to_thread(plan.candidates, url, links)
        else:
            candidates = plan.candidates(url, links)
        canonical = plan.canonical_of(outlinks.canonical) if outlinks else None
        expansion = Expansion(candidates, canonical)
        outcome = "cancelled" if _cancelled(result) else OUTCOMES[result.ok]
        await self._outputs.frontier(self._record("page", url, expansion, outcome))
        admitted = plan.expanded(url, expansion)
        self._outputs.total = len(plan.admitted)
        self._outputs.discovered = plan.discovered
        return admitted

    async def _publish(self, result: PageResult) -> None:
        self._outputs.discovered = self._plan.discovered
        await super()._publish(result)

    async def _attempt(self, url: str, deadline: PageDeadline) -> PageContent:
        """One try, once the host's politeness delay has passed (waiting for it is not in
        the backlog that pauses intake)."""
        with self._deps.scheduler.pacing():
            await self._pacer.turn(host_key(url))
        return await super()._attempt(url, deadline)

    async def _replay(self) -> dict[str, FrontierRecord]:
        """The job's pages an earlier run finished, by URL (and its sitemap, if it read one)."""
        records = await read_job(
            self._deps.settings,
            self._request.request_id,
            self._outputs.source,
            since_ms=self._since_ms,
        )
        done: dict[str, FrontierRecord] = {}
        for record in records:
            if record.kind == "sitemap":
                self._logged_sitemap = SitemapPages(record.links, record.left_out)
            elif record.url is not None:
                done[record.url] = record
        if records:
            log.info("crawl.resumed", pages=len(done), sitemap=self._logged_sitemap is not None)
        return done

    async def _sitemap(self) -> SitemapPages:
        """The sitemap's pages the budget can admit: as an earlier run logged them, or read
        now, cut at the budget and logged (what was left out is counted and logged)."""
        if self._logged_sitemap is not None:
            return self._logged_sitemap
        urls = await sitemap_urls(self._deps.sitemaps, self._request.urls)
        pages = await asyncio.to_thread(self._plan.sitemap_pages, urls)
        if pages.left_out:
            log.info(
                "sitemap.cut", listed=len(urls), kept=len(pages.links), left_out=pages.left_out
            )
        expansion = Expansion(links=pages.links)
        await self._outputs.frontier(
            self._record(
                "sitemap", None, expansion, None, left_out=pages.left_out, beyond=pages.beyond
            )
        )
        return pages

    def _record(
        self,
        kind: str,
        url: str | None,
        expansion: Expansion,
        outcome: str | None,
        *,
        left_out: int = 0,
        beyond: tuple[str, ...] = (),
    ) -> FrontierRecord:
        return FrontierRecord.model_validate(
            {
                "request_id": self._request.request_id,
                "source": self._outputs.source,
                "kind": kind,
                "url": url,
                "outcome": outcome,
                "links": expansion.links,
                "canonical": expansion.canonical,
                "left_out": left_out,
                "beyond": beyond,
            }
        )


def _cancelled(result: PageResult) -> bool:
    return result.error is not None and result.error.code in {
        ErrorCode.CANCELLED,
        ErrorCode.DEADLINE,
    }


def new_run(
    deps: WorkerDeps,
    request: CrawlRequest,
    *,
    source: RecordSource,
    priority: int = 0,
    owned: asyncio.Event | None = None,
    since_ms: int = 0,
) -> RequestRun:
    """The run a request asks for: a deep crawl with `crawl`, else a list crawl."""
    kind = RequestRun if request.crawl is None else DeepCrawlRun
    return kind(deps, request, source=source, priority=priority, owned=owned, since_ms=since_ms)
