"""Which URLs a deep crawl admits, decided the same way by every owner the job ever has.

Admission is a fold over the job's pages in the order they were admitted: the seeds, then
the sitemap's pages, then the links of each page in turn (document order), breadth first.
A page's links are folded only once every page admitted before it has been folded, so what
is admitted, at which depth, and where the budget cuts depends only on the pages' links and
never on which page finished rendering first. Rendering runs ahead freely; only the
decisions wait. That is what keeps `max_pages` exact across a failover: the next owner
replays the logged links through the same fold and reaches the same decisions.

Pure logic: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from service.frontier.scope import Scope
from service.frontier.seen import SeenSet
from service.frontier.urls import fingerprint, normalise

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from service.contracts import CrawlSpec

MAX_LINKS_SCANNED: Final = 10_000
"""Links of one page that are looked at (in document order); the rest are ignored."""

MAX_CANDIDATES: Final = 2_000
"""Candidate links kept from one page."""

MAX_CANDIDATE_CHARS: Final = 400_000
"""Characters of candidate links kept from one page (its frontier record stays one message)."""


LISTED_BEYOND_MAX: Final = 5000
"""Sitemap URLs beyond the budget a sitemap record still lists (not admitted): Firecrawl's
default `limit` of a map; the record is chunked when large."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """A page the crawl will give a result for."""

    url: str
    """Normalised."""
    depth: int
    parent_url: str | None


@dataclass(frozen=True, slots=True)
class SitemapPages:
    """What a crawl keeps of its sitemap: the pages the budget can admit (normalised, in
    scope, new, in order) and how many more unique in-scope URLs it listed (`left_out`:
    never logged, never admitted, counted as discovered)."""

    links: tuple[str, ...] = ()
    left_out: int = 0
    beyond: tuple[str, ...] = ()
    """The first `LISTED_BEYOND_MAX` of the URLs left out: logged for what lists a site's
    URLs without crawling them (the gateway's map), never admitted."""


@dataclass(frozen=True, slots=True)
class Expansion:
    """What a finished page contributes to the fold: its candidate links (normalised, in
    scope, in document order; empty for failed pages and pages at the depth limit), and its
    canonical URL when the crawl merges canonicals."""

    links: tuple[str, ...] = ()
    canonical: str | None = None


class CrawlPlan:
    """The admission state of one deep crawl: seen URLs, admitted pages, the fold's place."""

    def __init__(self, spec: CrawlSpec, seeds: Sequence[str]) -> None:
        self._spec = spec
        ignore = spec.ignore_query
        roots = list(dict.fromkeys(normalise(seed, ignore_query=ignore) or seed for seed in seeds))
        usable = [url for url in roots if normalise(url) is not None]
        self._scope = Scope.build(spec.scope, usable, spec.include, spec.exclude)
        self._seen = SeenSet()
        self.admitted: list[Admitted] = []
        """Every admitted page, in admission order (at most `max_pages`)."""
        self._index: dict[str, int] = {}
        """Normalised URL -> its place in `admitted`."""
        self._expansions: dict[int, Expansion] = {}
        """Finished pages the fold has not reached yet."""
        self._folded = 0
        """Pages of `admitted` whose links have been folded."""
        self._awaiting_sitemap = spec.sitemap
        self.discovered = 0
        """Unique in-scope URLs known so far, admitted or not (seeds included)."""
        for url in roots:  # a seed that is not a usable URL still gets its (failed) result
            self._discover(url, 0, None)

    @property
    def max_pages(self) -> int:
        return self._spec.max_pages

    @property
    def full(self) -> bool:
        """The budget is spent: nothing more will be admitted."""
        return len(self.admitted) >= self._spec.max_pages

    @property
    def exhausted(self) -> bool:
        """Every admitted page has been folded: nothing more will ever be admitted."""
        return not self._awaiting_sitemap and self._folded == len(self.admitted)

    def depth_of(self, url: str) -> int:
        return self.admitted[self._index[url]].depth

    def candidates(self, page_url: str, links: Sequence[str]) -> tuple[str, ...]:
        """The links of `page_url` that the fold will consider: normalised, in scope, unique,
        in order; none when the page is at the depth limit. At most `MAX_LINKS_SCANNED` links
        of a page are looked at and `MAX_CANDIDATES` (or `MAX_CANDIDATE_CHARS`) kept, so a
        page's frontier record always fits in one message."""
        if self.depth_of(page_url) >= self._spec.max_depth:
            return ()
        kept: dict[str, None] = {}
        chars = 0
        for link in links[:MAX_LINKS_SCANNED]:
            url = normalise(link, ignore_query=self._spec.ignore_query)
            if url is None or url in kept or not self._scope.admits(url):
                continue
            chars += len(url)
            if len(kept) == MAX_CANDIDATES or chars > MAX_CANDIDATE_CHARS:
                break
            kept[url] = None
        return tuple(kept)

    def canonical_of(self, canonical: str | None) -> str | None:
        """The canonical URL the fold marks seen, when the crawl merges canonicals."""
        if not self._spec.follow_canonical or canonical is None:
            return None
        return normalise(canonical, ignore_query=self._spec.ignore_query)

    def sitemap_pages(self, urls: Iterable[str]) -> SitemapPages:
        """The sitemap's URLs as `add_sitemap` would admit them, cut at the budget: the
        fold waits for the sitemap, so the pages admitted before it are the seeds, and no
        more than `max_pages` less those can ever be admitted from it. What a site lists
        beyond that is only counted, so the sitemap's frontier record stays small."""
        room = max(self._spec.max_pages - len(self.admitted), 0)
        kept: list[str] = []
        beyond: list[str] = []
        listed = SeenSet()
        left_out = 0
        for link in urls:
            url = normalise(link, ignore_query=self._spec.ignore_query)
            if url is None or not self._scope.admits(url):
                continue
            fp = fingerprint(url)
            if fp in self._seen or not listed.add(fp):
                continue
            if len(kept) < room:
                kept.append(url)
            else:
                left_out += 1
                if len(beyond) < LISTED_BEYOND_MAX:
                    beyond.append(url)
        return SitemapPages(tuple(kept), left_out, tuple(beyond))

    def add_sitemap(self, urls: Iterable[str], *, left_out: int = 0) -> list[Admitted]:
        """Admit the sitemap's pages (depth 0, after the seeds); the fold waits for this
        when the crawl asked for the sitemap. `left_out`: unique in-scope URLs it listed
        beyond the budget (`sitemap_pages`), counted as discovered. Returns the pages newly
        admitted."""
        if not self._awaiting_sitemap:
            return []
        self._awaiting_sitemap = False
        start = len(self.admitted)
        for link in urls:
            url = normalise(link, ignore_query=self._spec.ignore_query)
            if url is not None and self._scope.admits(url):
                self._discover(url, 0, None)
        self.discovered += left_out
        return self.admitted[start:] + self._fold()

    def expanded(self, url: str, expansion: Expansion) -> list[Admitted]:
        """Record that `url` finished with `expansion`; fold every page the order allows.
        Returns the pages newly admitted."""
        self._expansions[self._index[url]] = expansion
        return self._fold()

    def _fold(self) -> list[Admitted]:
        if self._awaiting_sitemap:
            return []
        start = len(self.admitted)
        while (expansion := self._expansions.pop(self._folded, None)) is not None:
            page = self.admitted[self._folded]
            self._folded += 1
            if expansion.canonical is not None:
                self._seen.add(fingerprint(expansion.canonical))
            for link in expansion.links:
                self._discover(link, page.depth + 1, page.url)
        return self.admitted[start:]

    def _discover(self, url: str, depth: int, parent_url: str | None) -> None:
        if self._seen.add(fingerprint(url)):
            self.discovered += 1
            if not self.full:
                self._admit_unseen(url, depth, parent_url)

    def _admit_unseen(self, url: str, depth: int, parent_url: str | None) -> None:
        self._index[url] = len(self.admitted)
        self.admitted.append(Admitted(url, depth, parent_url))
