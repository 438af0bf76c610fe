"""A request's `extract` schema read from a parsed page: the result's `json`.

`Extractor` is the seam: `SelectorExtractor` reads a selector schema (like Crawl4AI's
`JsonCssExtractionStrategy`); an LLM-backed extractor (out of scope) would be another
implementation, chosen by a future option, reading the same input (its markdown made from the
tree) and giving the same `json`. Extractors run in a worker thread with the page's own tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from pydantic import JsonValue
    from selectolax.lexbor import LexborHTMLParser, LexborNode

    from service.contracts import ExtractField, ExtractSchema

_NUMBER: Final = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")
"""The first number in a text: `,` as a thousands separator, `.` as the decimal point."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractionInput:
    """What an extractor reads: the page as shaped by the request, parsed, and its URL."""

    tree: LexborHTMLParser
    base_url: str


class Extractor(Protocol):
    """Turns a page into the result's `json`."""

    def extract(self, page: ExtractionInput) -> JsonValue:
        """The result's `json` for `page` (it must not mutate the tree)."""
        ...


def extractor_for(schema: ExtractSchema | None) -> Extractor | None:
    """The extractor a request's `extract` option asks for (None: no `json`)."""
    return None if schema is None else SelectorExtractor(schema)


@dataclass(frozen=True, slots=True)
class SelectorExtractor:
    """Reads a selector schema: a list of objects, one per `base_selector` match, or one
    object of the whole page without it."""

    schema: ExtractSchema

    def extract(self, page: ExtractionInput) -> JsonValue:
        root = page.tree.body or page.tree.root
        if self.schema.base_selector is None:
            return _object(root, self.schema.fields) if root is not None else None
        if root is None:
            return []
        matches = page.tree.css(self.schema.base_selector)
        return [_object(node, self.schema.fields) for node in matches]


def _object(scope: LexborNode, fields: tuple[ExtractField, ...]) -> JsonValue:
    return {field.name: _value(scope, field) for field in fields}


def _value(scope: LexborNode, field: ExtractField) -> JsonValue:
    if field.type == "list":
        matches = _matches(scope, field.selector)
        if not matches:
            return field.default
        if field.fields is None:
            return [_text(node) for node in matches]
        return [_object(node, field.fields) for node in matches]
    node = _first(scope, field.selector)
    if node is None:
        return field.default
    value = _single(node, field)
    return field.default if value is None else value


def _single(node: LexborNode, field: ExtractField) -> JsonValue:
    if field.type == "text":
        return _text(node)
    if field.type == "html":
        return node.html
    if field.type == "attribute":
        return node.attributes.get(field.attribute or "")
    if field.type == "number":
        return parse_number(node.text(deep=True))
    return _object(node, field.fields or ())  # nested


def _matches(scope: LexborNode, selector: str | None) -> list[LexborNode]:
    return [scope] if selector is None else list(scope.css(selector))


def _first(scope: LexborNode, selector: str | None) -> LexborNode | None:
    return scope if selector is None else scope.css_first(selector)


def _text(node: LexborNode) -> str:
    return " ".join(node.text(deep=True).split())


def parse_number(text: str) -> int | float | None:
    """The first number in `text` (`"$1,299.50"` is 1299.5, `"12 items"` is 12); None if
    it has none."""
    found = _NUMBER.search(text)
    if found is None:
        return None
    digits = found.group().replace(",", "")
    return float(digits) if "." in digits else int(digits)
