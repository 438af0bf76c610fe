"""The `structured_data` format: a page's JSON-LD, microdata and Open Graph, parsed by
extruct (Zyte's extractor, on lxml) from one parse of the document.

extruct is what Scrapy users reach for; its microdata follows the W3C algorithm (nested items,
`itemref`, repeated properties) and gives the `{"type", "properties"}` shape as is. JSON-LD is
read block by block so one broken block does not hide the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import lxml.etree
import lxml.html

from service.contracts import StructuredData

if TYPE_CHECKING:
    from lxml.html import HtmlElement

_JSON_LD_BLOCKS: Final = lxml.etree.XPath('//script[@type="application/ld+json"]')

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
    from extruct.jsonld import JsonLdExtractor  # noqa: PLC0415 (see above)

    extractor = JsonLdExtractor()
    items: list[Any] = []
    for block in _JSON_LD_BLOCKS(tree):
        try:
            items.extend(extractor.extract_items(block))
        except ValueError:  # not JSON, even without leading comments: left out
            continue
    return items


def _open_graph(tree: HtmlElement) -> dict[str, str]:
    from extruct.opengraph import OpenGraphExtractor  # noqa: PLC0415 (see above)

    properties: dict[str, str] = {}
    for item in OpenGraphExtractor().extract_items(tree):
        for name, value in item["properties"]:
            properties.setdefault(name, value)
    return properties
