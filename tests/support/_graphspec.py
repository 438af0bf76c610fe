"""What each page of the graph site holds: status, title and anchors as written in its HTML.

Pure functions of a page's path and query (and the site's origin, which one link spells out in
upper case). `_graph` resolves these anchors into the link graph; `_graphhtml` renders them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ARTICLES", "Anchor", "PageSpec", "page_spec", "sitemap_paths"]

ARTICLES = 270
"""Pages `/p/0` … `/p/{ARTICLES - 1}`, the main graph."""

ARTICLE_LINKS = (3, 6)
"""Inclusive bounds on the `/p/N` links of an article (besides its special links)."""

HOME_LINK_SHARE = 0.15
"""Share of articles that also link back to the home page."""

GRAPH_SEED = 11_000
"""Seed of the articles' links and filler; article n uses GRAPH_SEED + n."""

DOCS_SECTIONS = ("a", "b", "c")
"""Sections of the `/docs/` subtree, each an index page and DOCS_LEAVES leaves."""

DOCS_LEAVES = 5
"""Leaves `/docs/{section}/{i}` per section."""

SCRIPT_ARTICLE = 4
"""The article whose script appends the only link to `/js-only`."""

ORPHANS = 10
"""Pages `/orphan/0` … listed in the sitemap and reached by no link."""

PRIVATE_TARGET = "http://10.0.0.1/secret"
"""Where `/go/private` redirects: a private address off the site."""

OFF_SITE = ("https://example.com/x", "http://other.invalid/", "http://10.0.0.1/admin")
"""Links that leave the site; the last one is a private address."""

SITEMAP_PATHS = ("/", "/p/0", "/p/100", "/docs/")
"""Linked pages the sitemap lists before the orphans."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Anchor:
    """An `<a>` element as written: its `href` attribute, `rel` attribute and text."""

    href: str
    text: str
    rel: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PageSpec:
    """One response of the site. `script_href` is a link a script appends after load."""

    status: int = 200
    title: str = "Not found"
    anchors: tuple[Anchor, ...] = ()
    base_href: str | None = None
    script_href: str | None = None
    location: str | None = None
    seed: int = 0


NOT_FOUND = PageSpec(status=404)
"""Any path or query the site does not serve."""


def page_spec(path: str, query: str, origin: str) -> PageSpec:
    """The page at `path` (decoded) with `query` (as written) on the site at `origin`.

    Articles and the docs ignore the query; the calendar reads its month from it.
    """
    head, slash, rest = path.removeprefix("/").partition("/")
    if slash and head in SUBTREES:
        return SUBTREES[head](rest, origin)
    if path == "/calendar":
        return _calendar(query)
    return FIXED.get(path, NOT_FOUND)


def sitemap_paths() -> list[str]:
    """Paths the sitemap lists, in its order."""
    return [*SITEMAP_PATHS, *(f"/orphan/{k}" for k in range(ORPHANS))]


def _number(text: str, limit: int) -> int | None:
    """`text` as a number below `limit` when written canonically (`7`, not `07` or `+7`)."""
    if not text.isdigit() or str(int(text)) != text or int(text) >= limit:
        return None
    return int(text)


def _page(
    title: str, hrefs: tuple[str, ...], *, seed: int = 0, base_href: str | None = None
) -> PageSpec:
    anchors = tuple(Anchor(href=href, text=f"Link {i}") for i, href in enumerate(hrefs))
    return PageSpec(title=title, anchors=anchors, seed=seed, base_href=base_href)


def _article(rest: str, origin: str) -> PageSpec:
    n = _number(rest, ARTICLES)
    if n is None:
        return NOT_FOUND
    rng = random.Random(GRAPH_SEED + n)
    children = [c for c in (2 * n + 1, 2 * n + 2) if c < ARTICLES]
    wanted = rng.randint(*ARTICLE_LINKS) - len(children)
    pool = [m for m in range(ARTICLES) if m != n and m not in children]
    targets = [f"/p/{m}" for m in children + rng.sample(pool, wanted)]
    rng.shuffle(targets)
    if rng.random() < HOME_LINK_SHARE:
        targets.append("/")
    plain = tuple(Anchor(href=href, text=f"Article link {i}") for i, href in enumerate(targets))
    anchors = plain + _article_extras(n, origin)
    script_href = "/js-only" if n == SCRIPT_ARTICLE else None
    return PageSpec(title=f"Article {n}", anchors=anchors, script_href=script_href, seed=n)


def _article_extras(n: int, origin: str) -> tuple[Anchor, ...]:
    """The link variants a few articles carry on top of their graph links."""
    hrefs: tuple[str, ...] = ()
    match n:
        case 1:  # all of these are /p/5, /p/7 and /p/8 once normalised
            upper = origin.replace("http://", "HTTP://", 1)
            hrefs = ("/p/5#top", f"{upper}/p/7", "/p/%37", "/p/8", "/p/8")
        case 2:  # three distinct nodes, and the first again with a fragment
            hrefs = ("/p/7?a=1&b=2", "/p/7?b=2&a=1", "/p/7?a=1&a=1", "/p/7?a=1&b=2#x")
        case 3:
            return (
                Anchor(href="/nofollow-only", text="Not to follow", rel="nofollow"),
                *(Anchor(href=href, text="Elsewhere") for href in OFF_SITE[:2]),
            )
        case 5:
            hrefs = (OFF_SITE[2], "/go/private")
        case 11:
            return (Anchor(href="/nofollow-only", text="Sponsor", rel="external nofollow"),)
    return tuple(Anchor(href=href, text="Variant") for href in hrefs)


def _docs(rest: str, _origin: str) -> PageSpec:
    if rest == "":
        return _page("Docs", ("a/", "b/", "c/", "guide", "/p/0"), seed=-1)
    if rest == "guide":
        return _page("Docs guide", ("./", "a/0", "c/4", "/p/20"), seed=-2)
    section, slash, leaf = rest.partition("/")
    if not slash or section not in DOCS_SECTIONS:
        return NOT_FOUND
    return _docs_section(section) if leaf == "" else _docs_leaf(section, leaf)


def _docs_leaf(section: str, leaf: str) -> PageSpec:
    number = _number(leaf, DOCS_LEAVES)
    if number is None:
        return NOT_FOUND
    index = DOCS_SECTIONS.index(section)
    beside = DOCS_SECTIONS[(index + 1) % len(DOCS_SECTIONS)]
    hrefs = (str((number + 1) % DOCS_LEAVES), "./", f"../{beside}/{number}", f"/p/{40 + number}")
    return _page(f"Docs {section} {number}", hrefs, seed=-10 * (index + 1) - number)


def _orphan(rest: str, _origin: str) -> PageSpec:
    k = _number(rest, ORPHANS)
    if k is None:
        return NOT_FOUND
    return _page(f"Orphan {k}", ("/", f"/p/{k * 27}"), seed=k)


def _docs_section(section: str) -> PageSpec:
    leaves = [str(i) for i in range(DOCS_LEAVES)]
    match section:
        case "a":  # relative forms: ./1, ../b/, ../../p/3 (out of the subtree), ../
            leaves[1] = "./1"
            return _page("Docs a", (*leaves, "../b/", "../../p/3", "../"), seed=-3)
        case "b":  # <base href> moves relative links to /docs/c/: `0` is /docs/c/0
            own = tuple(f"../b/{leaf}" for leaf in leaves)
            return _page(
                "Docs b", (*own, "0", "/docs/", "../../p/9"), seed=-4, base_href="/docs/c/"
            )
    return _page("Docs c", (*leaves, "../a/", "/p/12"), seed=-5)


def _calendar(query: str) -> PageSpec:
    """An endless calendar: each month links the next one (and the previous one)."""
    values = parse_qs(query).get("month", ["0"])
    month = _number(values[0], 10**9)
    if month is None:
        return NOT_FOUND
    hrefs = (f"?month={month + 1}", *([f"/calendar?month={month - 1}"] if month else []), "/")
    return _page(f"Calendar month {month}", hrefs, seed=month)


SUBTREES: dict[str, Callable[[str, str], PageSpec]] = {
    "p": _article,
    "docs": _docs,
    "orphan": _orphan,
}
"""Handlers of `/{head}/{rest}` paths, given `rest` and the site's origin."""

HOME_HREFS = (
    *(f"/p/{n}" for n in range(6)),
    "/p/1#intro",
    "#top",
    "/docs/",
    "/calendar?month=0",
    "/go/private",
    *OFF_SITE,
)
"""The home page's links: into the graph, the docs, the calendar trap, off the site."""

FIXED = {
    "/": _page("Graph site home", HOME_HREFS),
    "/nofollow-only": _page("Reached only through nofollow", ("/", "/p/0")),
    "/js-only": _page("Reached only by script", ("/p/1", "/")),
    "/go/private": PageSpec(status=302, title="Redirect", location=PRIVATE_TARGET),
}
"""Pages of one fixed path."""
