"""What a run crawls: a list of URLs, or a deep crawl's fold. One run loop serves both.

A plan names the pages a run gives a result for, in the order they may start, and learns
from each finished page (a deep crawl folds its links in admission order, so what it admits
never depends on which page finished first). Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from service.contracts import FollowLinks
from service.frontier.plan import Admitted, CrawlPlan, Expansion, SitemapPages

if TYPE_CHECKING:
    from service.contracts import CrawlRequest, CrawlSpec, FrontierRecord

LINKS_ON_LOOP: Final = 50
"""Links of a page filtered on the event loop; more are filtered in a thread."""


class PagePlan(Protocol):
    """The pages of one run and what finishing one of them adds."""

    @property
    def admitted(self) -> list[Admitted]:
        """Every page the run gives a result for so far, in order."""
        ...

    @property
    def discovered(self) -> int | None:
        """A deep crawl's unique in-scope URLs so far; None for a list."""
        ...

    @property
    def delay_ms(self) -> int:
        """Pacing of the run's pages of one host."""
        ...

    @property
    def wants_sitemap(self) -> bool: ...

    @property
    def deep(self) -> bool:
        """Pages' links fold into it (a deep crawl): its frontier log is its state, which a
        run rebuilds from and a tracked crawl compares with the previous one's."""
        ...

    @property
    def final(self) -> bool:
        """Nothing will be admitted beyond what is admitted now (a list)."""
        ...

    def follow(self, page: Admitted) -> FollowLinks | None:
        """Whether the fetcher should return the page's links."""
        ...

    def heavy(self, record: FrontierRecord) -> bool:
        """Finishing this page costs enough CPU to do `expansion` in a thread."""
        ...

    def expansion(self, record: FrontierRecord) -> Expansion:
        """What a page's outcome offers the plan (pure: a replayed record gives the same)."""
        ...

    def fold(self, record: FrontierRecord, expansion: Expansion) -> list[Admitted]:
        """Take a page's outcome and its expansion; returns the pages newly admitted."""
        ...

    def finished(self, record: FrontierRecord) -> list[Admitted]:
        """`fold` with the record's own expansion."""
        ...

    def sitemap_pages(self, urls: list[str]) -> SitemapPages:
        """What the plan would keep of a sitemap's URLs (pure, may take a thread)."""
        ...

    def sitemap(self, pages: SitemapPages) -> list[Admitted]:
        """Take the sitemap's pages; returns those newly admitted."""
        ...

    def completion(self) -> str | None:
        """The `detail` of the `completed` event."""
        ...


class ListPlan:
    """A request's own URLs, each a page at depth 0."""

    def __init__(self, urls: list[str]) -> None:
        self._admitted = [Admitted(url, 0, None) for url in dict.fromkeys(urls)]

    @property
    def admitted(self) -> list[Admitted]:
        return self._admitted

    @property
    def discovered(self) -> int | None:
        return None

    @property
    def delay_ms(self) -> int:
        return 0

    @property
    def wants_sitemap(self) -> bool:
        return False

    @property
    def deep(self) -> bool:
        return False

    @property
    def final(self) -> bool:
        return True

    def follow(self, page: Admitted) -> FollowLinks | None:  # noqa: ARG002
        return None

    def heavy(self, record: FrontierRecord) -> bool:  # noqa: ARG002
        return False

    def expansion(self, record: FrontierRecord) -> Expansion:  # noqa: ARG002
        return Expansion((), None)

    def fold(self, record: FrontierRecord, expansion: Expansion) -> list[Admitted]:  # noqa: ARG002
        return []

    def finished(self, record: FrontierRecord) -> list[Admitted]:  # noqa: ARG002
        return []

    def sitemap_pages(self, urls: list[str]) -> SitemapPages:  # noqa: ARG002
        return SitemapPages()

    def sitemap(self, pages: SitemapPages) -> list[Admitted]:  # noqa: ARG002
        return []

    def completion(self) -> str | None:
        return None


class DeepPlan:
    """A deep crawl: the seeds, then what their links lead to, within the budget."""

    def __init__(self, spec: CrawlSpec, seeds: list[str]) -> None:
        self._spec = spec
        self._plan = CrawlPlan(spec, seeds)

    @property
    def admitted(self) -> list[Admitted]:
        return self._plan.admitted

    @property
    def discovered(self) -> int | None:
        return self._plan.discovered

    @property
    def delay_ms(self) -> int:
        return self._spec.delay_ms

    @property
    def wants_sitemap(self) -> bool:
        return self._spec.sitemap

    @property
    def deep(self) -> bool:
        return True

    @property
    def final(self) -> bool:
        return False  # a page's links may admit more until the last page is folded

    def follow(self, page: Admitted) -> FollowLinks | None:
        if page.depth >= self._spec.max_depth:
            return None
        return FollowLinks(respect_nofollow=self._spec.respect_nofollow)

    def heavy(self, record: FrontierRecord) -> bool:
        return len(record.links) > LINKS_ON_LOOP

    def expansion(self, record: FrontierRecord) -> Expansion:
        """The page's candidates (normalised, in scope) and canonical, as the fold takes
        them; pure and deterministic, so a replayed record gives the same."""
        if record.url is None or record.outcome != "succeeded":
            return Expansion((), None)
        candidates = self._plan.candidates(record.url, record.links)
        return Expansion(candidates, self._plan.canonical_of(record.canonical))

    def finished(self, record: FrontierRecord) -> list[Admitted]:
        return self.fold(record, self.expansion(record))

    def fold(self, record: FrontierRecord, expansion: Expansion) -> list[Admitted]:
        if record.url is None:
            return []
        return self._plan.expanded(record.url, expansion)

    def sitemap_pages(self, urls: list[str]) -> SitemapPages:
        return self._plan.sitemap_pages(urls)

    def sitemap(self, pages: SitemapPages) -> list[Admitted]:
        return self._plan.add_sitemap(pages.links, left_out=pages.left_out)

    def completion(self) -> str:
        plan = self._plan
        pages = len(plan.admitted)
        if plan.full and plan.discovered > pages:
            return f"budget spent: max_pages {plan.max_pages} reached, {plan.discovered} discovered"
        return f"frontier exhausted: {pages} pages, {plan.discovered} discovered"


def plan_for(request: CrawlRequest) -> PagePlan:
    if request.crawl is None:
        return ListPlan(request.urls)
    return DeepPlan(request.crawl, request.urls)
