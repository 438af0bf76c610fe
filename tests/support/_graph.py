"""The graph site's link graph, as a reference crawl sees it: nodes, links, statuses, sitemap.

A node is a normalised absolute URL (`http://127.0.0.1:PORT/path?query`). Everything here is
computed from `_graphspec`, the same source the server renders, so no crawl of the server is
needed to know the graph; the calendar makes it infinite, so links are computed on demand.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from _graphspec import NOT_FOUND, PageSpec, page_spec, sitemap_paths
from _urlnorm import normalise, origin_of, resolve

__all__ = ["Graph", "Link"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One link of a page: `href` as written, `target` the normalised absolute URL it means."""

    href: str
    target: str
    nofollow: bool
    by_script: bool


@dataclass(frozen=True, slots=True)
class Graph:
    """The link graph of a graph site served at `origin` (`http://127.0.0.1:PORT`)."""

    origin: str

    def url(self, path: str) -> str:
        """The node of `path` (which starts with `/`, and may carry a query)."""
        return normalise(self.origin + path)

    def spec_of(self, node: str) -> PageSpec:
        """What the site serves for `node`; a 404 for anything off the site."""
        node = normalise(node)
        if origin_of(node) != normalise(self.origin).rstrip("/"):
            return NOT_FOUND
        parts = urlsplit(node)
        return page_spec(parts.path, parts.query, self.origin)

    def status_of(self, node: str) -> int:
        """The HTTP status of `node`: 200, 302 for `/go/private`, 404 for unknown pages."""
        return self.spec_of(node).status

    def links_of(self, node: str) -> list[Link]:
        """The links of `node` in document order of the rendered DOM, the script's one last.

        Pages that are not a 200 have no links.
        """
        node = normalise(node)
        spec = self.spec_of(node)
        if spec.status != 200:
            return []
        base = urljoin(node, spec.base_href) if spec.base_href else node
        links = [
            Link(
                href=anchor.href,
                target=resolve(base, anchor.href),
                nofollow="nofollow" in anchor.rel.split(),
                by_script=False,
            )
            for anchor in spec.anchors
        ]
        if spec.script_href is not None:
            target = resolve(base, spec.script_href)
            links.append(Link(href=spec.script_href, target=target, nofollow=False, by_script=True))
        return links

    def sitemap_urls(self) -> list[str]:
        """The URLs `/sitemap.xml` lists, in its order."""
        return [self.url(path) for path in sitemap_paths()]
