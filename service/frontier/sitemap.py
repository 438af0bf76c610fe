"""The sitemaps of a deep crawl's sites: where they are, and the page URLs they list.

For each distinct origin of the seeds (in seed order): the `Sitemap:` lines of its robots.txt,
then `/sitemap.xml` when robots.txt names none. A `<sitemapindex>` is followed one level
deep; `<urlset>` `<loc>`s are taken in document order. Files are read through the egress proxy
(the URL policy judges them like pages), at most `MAX_SITEMAP_BYTES` each and
`MAX_SITEMAP_FILES` per crawl. Gzipped `.xml.gz` files are not read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

from selectolax.lexbor import LexborHTMLParser

from service.http.robots import Origin
from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from service.http.robots import RobotsFile

log = get_logger(__name__)

MAX_SITEMAP_BYTES: Final = 10 * 1024 * 1024
"""Bytes of one sitemap that are read (the protocol allows 50 MB uncompressed)."""

MAX_SITEMAP_FILES: Final = 20
"""Sitemap files read for one crawl, index files included."""

_OK: Final = range(200, 300)


class TextSource(Protocol):
    """Fetches a text file; never raises for network trouble (status None instead)."""

    async def fetch(self, url: str, *, max_bytes: int = ...) -> RobotsFile: ...


def sitemaps_in_robots(text: str) -> list[str]:
    """The `Sitemap:` URLs of a robots.txt, in order (the field name is case-insensitive)."""
    found: list[str] = []
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() == "sitemap" and value.strip():
            found.append(value.strip())
    return found


def read_sitemap(text: str) -> tuple[list[str], list[str]]:
    """(page URLs, nested sitemap URLs) of one sitemap file: a `<urlset>` or a
    `<sitemapindex>`. Parsed leniently as markup (entities of a DTD are never expanded)."""
    tree = LexborHTMLParser(text)
    locations = [(node.text() or "").strip() for node in tree.css("loc")]
    locations = [url for url in locations if url]
    if tree.css_first("sitemapindex") is not None:
        return [], locations
    return locations, []


async def sitemap_urls(source: TextSource, seeds: Sequence[str]) -> list[str]:
    """The page URLs the seeds' sites list in their sitemaps, in order (not deduplicated)."""
    origins: dict[Origin, None] = {}
    for seed in seeds:
        try:
            origins[Origin.of(seed)] = None
        except ValueError:
            continue
    files: list[str] = []
    for origin in origins:
        robots = await source.fetch(origin.robots_url)
        named = sitemaps_in_robots(robots.text) if robots.status in _OK else []
        files.extend(named or [origin.robots_url.removesuffix("robots.txt") + "sitemap.xml"])
    pages: list[str] = []
    read = 0
    queue = list(dict.fromkeys(files))
    seen_files = set(queue)
    while queue and read < MAX_SITEMAP_FILES:
        url = queue.pop(0)
        read += 1
        answer = await source.fetch(url, max_bytes=MAX_SITEMAP_BYTES)
        if answer.status not in _OK:
            log.info("sitemap.unavailable", url=url, status=answer.status)
            continue
        found, nested = read_sitemap(answer.text)
        pages.extend(found)
        for child in nested:
            if child not in seen_files:
                seen_files.add(child)
                queue.append(child)
    return pages
