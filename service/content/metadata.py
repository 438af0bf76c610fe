"""Title, description, language, canonical URL and Open Graph properties of a parsed page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from service.contracts import PageMetadata

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser, LexborNode

    from service.content.links import UrlResolver

_TITLE_SELECTOR: Final = "title:not(svg title)"
"""The document's title element (an SVG `<title>` is a tooltip, not the page title)."""

_OPEN_GRAPH_PREFIX: Final = "og:"


def collapsed(value: str | None) -> str | None:
    """`value` with whitespace runs collapsed to one space and stripped; None when empty."""
    if not value:
        return None
    return " ".join(value.split()) or None


def title_of(tree: LexborHTMLParser) -> str | None:
    """The title as `document.title` reads it: whitespace stripped and collapsed."""
    node = tree.css_first(_TITLE_SELECTOR)
    return collapsed(node.text()) if node is not None else None


def metadata_of(
    tree: LexborHTMLParser, *, title: str | None, resolver: UrlResolver
) -> PageMetadata:
    """The page's metadata; `resolver` makes the canonical URL absolute."""
    description: str | None = None
    open_graph: dict[str, str] = {}
    for node in tree.css("meta[content]"):
        attributes = node.attributes
        content = (attributes.get("content") or "").strip()
        name = (attributes.get("name") or "").strip().lower()
        key = (attributes.get("property") or name).strip()
        if name == "description" and description is None:
            description = collapsed(content)
        elif key.lower().startswith(_OPEN_GRAPH_PREFIX) and content:
            open_graph.setdefault(key[len(_OPEN_GRAPH_PREFIX) :], content)
    return PageMetadata(
        title=title,
        description=description,
        language=_language_of(tree.root),
        canonical=canonical_of(tree, resolver),
        open_graph={key: value for key, value in open_graph.items() if key},
    )


def _language_of(root: LexborNode | None) -> str | None:
    return collapsed(root.attributes.get("lang")) if root is not None else None


def canonical_of(tree: LexborHTMLParser, resolver: UrlResolver) -> str | None:
    for node in tree.css("link[rel][href]"):
        attributes = node.attributes
        if "canonical" in (attributes.get("rel") or "").lower().split():
            resolved = resolver.resolve(attributes.get("href") or "")
            return resolved.url if resolved is not None else None
    return None
