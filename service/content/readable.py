"""The readable content of a parsed page, as plain text (one block per line) or Markdown."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urljoin

from service.content.markdown import markdown_from_html

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser, LexborNode

INVISIBLE_TAGS: Final = ("script", "style", "noscript", "template", "svg")
"""Elements whose content a reader never sees as text."""

_HIDDEN_SELECTOR: Final = "[hidden]:not([hidden] *)"
"""Outermost elements with the `hidden` attribute."""

_LINE: Final = "\x00"
"""Marks a line break in the text of the tree; the parser never leaves NUL in text nodes."""

_BLOCK_SELECTOR: Final = (
    "address, article, aside, blockquote, caption, center, dd, details, dialog, dir, div, dl,"
    " dt, fieldset, figcaption, figure, footer, form, h1, h2, h3, h4, h5, h6, header, hgroup,"
    " hr, legend, li, main, menu, nav, ol, option, p, section, summary, table, tr, ul"
)
"""Elements that start and end a line of text."""

_CELL_SELECTOR: Final = "td, th"
"""Table cells: separated by a space within their row."""

_PRE_SELECTOR: Final = "pre:not(pre pre)"
"""Outermost preformatted blocks: their own line breaks are kept."""

_TABLE_SECTIONS: Final = ("thead", "tbody", "tfoot")
"""Unwrapped before conversion: markdownify searches a whole section for every row in it."""

_RESOLVED_ATTRIBUTES: Final = (("a[href]", "href"), ("img[src]", "src"))
"""Attributes made absolute so Markdown links work outside the page."""


def visible_content(tree: LexborHTMLParser) -> LexborNode | None:
    """The body of `tree` without the elements a reader does not see (mutates `tree`)."""
    tree.strip_tags(list(INVISIBLE_TAGS))
    for node in tree.css(_HIDDEN_SELECTOR):
        node.decompose(recursive=False)
    return tree.body or tree.root


def text_of(content: LexborNode) -> str:
    """Visible text, one block per line, whitespace collapsed (mutates `content`)."""
    for node in content.css(_PRE_SELECTOR):
        node.replace_with(_LINE + node.text().replace("\n", _LINE) + _LINE)
    for node in content.css("br"):
        node.replace_with(_LINE)
    for node in content.css(_CELL_SELECTOR):
        node.insert_after(" ")
    for node in content.css(_BLOCK_SELECTOR):
        node.insert_before(_LINE)
        node.insert_after(_LINE)
    lines = (" ".join(part.split()) for part in content.text().split(_LINE))
    return "\n".join(line for line in lines if line)


def markdown_of(content: LexborNode, base: str) -> str | None:
    """Markdown with absolute links; None when nesting is too deep for it (mutates `content`)."""
    _resolve_urls(content, base)
    content.unwrap_tags(list(_TABLE_SECTIONS))
    return markdown_from_html(content.html or "")


def _resolve_urls(content: LexborNode, base: str) -> None:
    for selector, attribute in _RESOLVED_ATTRIBUTES:
        for node in content.css(selector):
            value = (node.attributes.get(attribute) or "").strip()
            if value and not value.startswith("#"):
                node.attrs[attribute] = _joined(base, value)


def _joined(base: str, value: str) -> str:
    try:
        return urljoin(base, value)
    except ValueError:
        return value
