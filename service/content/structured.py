"""The `structured_data` format: a page's JSON-LD, microdata and Open Graph, parsed by
extruct (Zyte's extractor, on lxml) from one parse of the document.

extruct is what Scrapy users reach for; its microdata follows the W3C algorithm (nested items,
`itemref`, repeated properties) and gives the `{"type", "properties"}` shape as is. JSON-LD is
read block by block so one broken block does not hide the others.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Final

import lxml.etree
import lxml.html

from service.contracts import StructuredData

if TYPE_CHECKING:
    from lxml.html import HtmlElement

_JSON_LD_BLOCKS: Final = lxml.etree.XPath('//script[@type="application/ld+json"]')

MAX_JSON_LD_DEPTH: Final = 32
"""Arrays and objects of a JSON-LD block nested deeper are `null` (real graphs nest a few
levels; 100,000 levels would exhaust the parser's recursion)."""

_JSON_TOKENS: Final = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
"""A JSON string (whole, escapes included) or a bracket."""

# extruct is imported where it is used: its package imports every syntax it knows (rdflib,
# pyRdfa, mf2py, requests), 170 ms of every worker's and gateway's start, for a format few
# requests ask for (the first page asking pays it once).


def structured_data(html: str, *, base_url: str) -> StructuredData:
    """The structured data of the page at `base_url`; empty lists when it declares none."""
    from extruct.w3cmicrodata import MicrodataExtractor  # noqa: PLC0415 (see above)

    tree = _parsed(html)
    if tree is None:
        return StructuredData()
    return StructuredData(
        json_ld=_json_ld(tree),
        microdata=MicrodataExtractor().extract_items(tree, base_url),
        open_graph=_open_graph(tree),
    )


def _parsed(html: str) -> HtmlElement | None:
    try:
        return lxml.html.fromstring(html.encode(), parser=lxml.html.HTMLParser(encoding="utf-8"))
    except (lxml.etree.ParserError, ValueError):  # an empty or unparsable document
        return None


def _json_ld(tree: HtmlElement) -> list[Any]:
    items: list[Any] = []
    for block in _JSON_LD_BLOCKS(tree):
        try:
            data = _json_ld_data(block.xpath("string()"))
        except ValueError:  # not JSON, even without leading comments: left out
            continue
        found = data if isinstance(data, list) else [data] if isinstance(data, dict) else []
        items.extend(item for item in found if item)
    return items


def _json_ld_data(script: str) -> Any:  # noqa: ANN401 (whatever the JSON holds)
    """A JSON-LD block's value, read as extruct reads it (leading comments tolerated), cut
    at `MAX_JSON_LD_DEPTH`."""
    from extruct.jsonld import HTML_OR_JS_COMMENTLINE, jstyleson  # noqa: PLC0415 (see above)

    script = cut_depth(script, MAX_JSON_LD_DEPTH)
    try:
        return json.loads(script, strict=False)
    except RecursionError as exc:
        raise ValueError(str(exc)) from exc
    except ValueError:
        return jstyleson.loads(HTML_OR_JS_COMMENTLINE.sub("", script), strict=False)


def cut_depth(text: str, max_depth: int) -> str:
    """JSON `text` with every array or object nested deeper than `max_depth` replaced by
    `null` (a linear scan: strings are skipped whole, so brackets in them do not count)."""
    depth = 0
    kept: list[str] = []
    start = 0
    cutting_from: int | None = None
    for token in _JSON_TOKENS.finditer(text):
        mark = token.group()
        if mark[0] == '"':
            continue
        if mark in "[{":
            depth += 1
            if depth == max_depth + 1:
                cutting_from = token.start()
        elif depth > 0:
            depth -= 1
            if depth == max_depth and cutting_from is not None:
                kept += [text[start:cutting_from], "null"]
                start, cutting_from = token.end(), None
    if cutting_from is not None:  # never closed: cut to the end
        kept += [text[start:cutting_from], "null"]
        return "".join(kept)
    kept.append(text[start:])
    return "".join(kept)


def _open_graph(tree: HtmlElement) -> dict[str, str]:
    from extruct.opengraph import OpenGraphExtractor  # noqa: PLC0415 (see above)

    properties: dict[str, str] = {}
    for item in OpenGraphExtractor().extract_items(tree):
        for name, value in item["properties"]:
            properties.setdefault(name, value)
    return properties
