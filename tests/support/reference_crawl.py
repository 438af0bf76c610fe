"""The reference deep crawl: which pages a crawl of the graph site must return, from the graph.

Independent of the service's code: it reads only the site's graph (`links_of`, `status_of`,
`sitemap_urls`) and normalises URLs with the test support's own `_urlnorm`. Integration tests
compare the crawler's set of result URLs with the URLs of `reference_crawl(...)`.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol
from urllib.parse import urlsplit

from _urlnorm import normalise

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from _graph import Link

__all__ = ["Admitted", "LinkGraph", "reference_crawl"]

OK = 200
"""The only status whose page has its links followed."""


class LinkGraph(Protocol):
    """What the reference reads of a site: a `Graph` or a running `GraphSite`."""

    def links_of(self, node: str) -> list[Link]: ...
    def status_of(self, node: str) -> int: ...
    def sitemap_urls(self) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class Admitted:
    """A page the crawl admits: its normalised URL, depth, and the page that linked it."""

    url: str
    depth: int
    parent_url: str | None


def reference_crawl(
    site: LinkGraph,
    seeds: Sequence[str],
    *,
    max_depth: int,
    max_pages: int,
    scope: Literal["host", "prefix"] = "host",
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    sitemap: bool = False,
    respect_nofollow: bool = True,
    ignore_query: bool = False,
    scripts: bool = True,
) -> list[Admitted]:
    """The pages a breadth-first crawl admits, in admission order. Exactly:

    1. Seeds (absolute URLs; normalised here, with their query dropped when `ignore_query`;
       duplicates after normalisation dropped, order kept) are admitted first at depth 0 with
       no parent, regardless of scope and include/exclude, up to `max_pages`.
    2. With `sitemap`, the site's sitemap URLs (normalised the same way) follow, in sitemap
       order, each admitted at depth 0 with no parent if not yet seen, in scope and passing
       include/exclude, while budget remains.
    3. Then strict BFS, level by level: each page of depth d, in admission order, is expanded
       when d < `max_depth` and its status is 200 (redirects, such as the 302 of `/go/private`
       to a private address, and 404s are failed pages whose links are not followed). Its links
       in document order: nofollow ones are skipped when `respect_nofollow`; links a script
       inserted are followed like any other when `scripts` (the browser runs them), and not
       at all without (the HTTP path reads the document as served). The target is
       normalised (its query dropped when `ignore_query`). It is skipped if already seen, out
       of scope or failing include/exclude; otherwise it is seen (discovered) and admitted at
       depth d+1 with the page as parent, while fewer than `max_pages` are admitted. A URL
       discovered once the budget is spent is never admitted.
    - Scope `host`: the URL's host name (port ignored) is the host name of one of the seeds.
      Scope `prefix`: the URL starts with one seed's directory, the seed URL up to and including
      the last `/` of its path (its query dropped).
    - `include` / `exclude`: Python `re.search` on the normalised URL; a non-empty `include`
      needs one pattern to match, and no `exclude` pattern may match.
    """
    seed_urls = list(dict.fromkeys(normalise(url, ignore_query=ignore_query) for url in seeds))
    wanted = _admission_test(seed_urls, scope, include, exclude)
    crawl = _Admissions(max_pages)
    for url in seed_urls:
        crawl.admit(url, 0, None)
    if sitemap:
        for raw in site.sitemap_urls():
            url = normalise(raw, ignore_query=ignore_query)
            if url not in crawl.seen and wanted(url):
                crawl.admit(url, 0, None)
    queue = deque(crawl.admitted)
    while queue and not crawl.full:
        page = queue.popleft()
        if page.depth >= max_depth or site.status_of(page.url) != OK:
            continue
        for url in _followed(site, page.url, respect_nofollow, ignore_query, scripts):
            if url not in crawl.seen and wanted(url):
                queue.extend(crawl.admit(url, page.depth + 1, page.url))
    return crawl.admitted


@dataclass(slots=True)
class _Admissions:
    """URLs seen so far and pages admitted, up to `max_pages`."""

    max_pages: int
    admitted: list[Admitted] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    @property
    def full(self) -> bool:
        return len(self.admitted) >= self.max_pages

    def admit(self, url: str, depth: int, parent: str | None) -> list[Admitted]:
        """Mark `url` seen and admit it if budget remains; the admitted page, if any."""
        self.seen.add(url)
        if self.full:
            return []
        self.admitted.append(Admitted(url, depth, parent))
        return self.admitted[-1:]


def _followed(
    site: LinkGraph, page: str, respect_nofollow: bool, ignore_query: bool, scripts: bool
) -> Iterator[str]:
    """The normalised targets of the links of `page` a crawl follows, in document order."""
    for link in site.links_of(page):
        if link.by_script and not scripts:
            continue
        if not (link.nofollow and respect_nofollow):
            yield normalise(link.target, ignore_query=ignore_query)


def _admission_test(
    seeds: list[str], scope: str, include: Sequence[str], exclude: Sequence[str]
) -> Callable[[str], bool]:
    """Whether a discovered URL may be admitted: in scope and passing include/exclude."""
    hosts = {urlsplit(seed).hostname for seed in seeds}
    prefixes = tuple(_directory(seed) for seed in seeds)
    includes = [re.compile(pattern) for pattern in include]
    excludes = [re.compile(pattern) for pattern in exclude]

    def wanted(url: str) -> bool:
        in_scope = (
            url.startswith(prefixes) if scope == "prefix" else urlsplit(url).hostname in hosts
        )
        return (
            in_scope
            and (not includes or any(p.search(url) for p in includes))
            and not any(p.search(url) for p in excludes)
        )

    return wanted


def _directory(url: str) -> str:
    """The URL up to and including the last `/` of its path."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path[: parts.path.rindex('/') + 1]}"
