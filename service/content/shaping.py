"""Which parts of a page its markdown, text and `json` are made of: `only_main_content`,
`include_tags` and `exclude_tags`, applied to a parsed page (it mutates the tree)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from selectolax.lexbor import LexborHTMLParser

if TYPE_CHECKING:
    from collections.abc import Iterable

    from selectolax.lexbor import LexborNode

    from service.contracts import CrawlOptions

NOT_MAIN_SELECTOR: Final = (
    "nav, aside, dialog,"
    " header:not(article header, section header, main header, aside header, nav header),"
    " footer:not(article footer, section footer, main footer, aside footer, nav footer),"
    " [role=navigation], [role=banner], [role=contentinfo], [role=complementary],"
    " [role=dialog], [role=alertdialog]"
)
"""What is not the main content: landmarks around it (a `header` or `footer` is the page's
banner or content info only outside sectioning content, as ARIA maps them) and dialogs."""

BANNER_WORDS: Final = ("cookie", "consent", "gdpr")
"""An element whose id, class or `aria-label` contains one of them is a cookie banner."""

BANNER_SELECTOR: Final = ", ".join(
    f"[{attribute}*={word} i]"
    for attribute in ("id", "class", "aria-label")
    for word in BANNER_WORDS
)

KEPT_SELECTOR: Final = "main, article, [role=main]"
"""A banner candidate holding one of these wraps the content itself: it is kept."""

NEVER_DROPPED: Final = frozenset({"html", "head", "body", "main", "article"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Shaping:
    """Which parts of a page are kept (see `CrawlOptions.only_main_content` and the tags)."""

    only_main_content: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, options: CrawlOptions) -> Shaping:
        return cls(
            only_main_content=options.only_main_content,
            include=options.include_tags,
            exclude=options.exclude_tags,
        )

    @property
    def shapes(self) -> bool:
        return self.only_main_content or bool(self.include or self.exclude)


NO_SHAPING: Final = Shaping()
"""The whole page."""


def shaped(tree: LexborHTMLParser, shaping: Shaping) -> LexborHTMLParser:
    """`tree` without what `shaping` leaves out (mutated), or a new tree of only the included
    elements."""
    for selector in shaping.exclude:
        _drop(tree.css(selector))
    if shaping.only_main_content:
        _drop(tree.css(NOT_MAIN_SELECTOR))
        _drop(node for node in tree.css(BANNER_SELECTOR) if _is_banner(node))
    if not shaping.include:
        return tree
    return LexborHTMLParser(
        f"<html><body>{''.join(_included(tree, shaping.include))}</body></html>"
    )


def _included(tree: LexborHTMLParser, selectors: tuple[str, ...]) -> list[str]:
    """The outer HTML of the outermost matches of any of `selectors`, in document order."""
    matches = [node for selector in selectors for node in tree.css(selector)]
    marked = {node.mem_id for node in matches}
    outermost = {node.mem_id: node for node in matches if not _has_ancestor_in(node, marked)}
    body = tree.body or tree.root
    if body is None:
        return []
    return [node.html or "" for node in body.traverse() if node.mem_id in outermost]


def _has_ancestor_in(node: LexborNode, marked: set[int]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.mem_id in marked:
            return True
        parent = parent.parent
    return False


def _is_banner(node: LexborNode) -> bool:
    return node.tag not in NEVER_DROPPED and node.css_first(KEPT_SELECTOR) is None


def _drop(nodes: Iterable[LexborNode]) -> None:
    """Decompose the outermost of `nodes` (an inner one goes with its ancestor: decomposing
    it as well would touch freed memory)."""
    candidates = [node for node in nodes if node.tag not in {"html", "head", "body"}]
    marked = {node.mem_id for node in candidates}
    for node in [node for node in candidates if not _has_ancestor_in(node, marked)]:
        node.decompose()
