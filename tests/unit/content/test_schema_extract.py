"""Selector schemas: the `json` a request's `extract` reads from a page."""

from __future__ import annotations

import pytest
from selectolax.lexbor import LexborHTMLParser

from service.content.schema_extract import ExtractionInput, SelectorExtractor, parse_number
from service.contracts import ExtractSchema

PRODUCTS = """<html><body><h1>Shop</h1><ul>
<li class="product"><h2>Kettle <b>Pro</b></h2><a href="/kettle">more</a>
  <span class="price">$1,299.50</span><span class="tag">steel</span><span class="tag">2 l</span>
  <div class="seller"><span class="name">Acme</span><a href="/acme">shop</a></div></li>
<li class="product"><h2>Mug</h2><span class="price">12 EUR</span></li>
</ul></body></html>"""

SCHEMA = {
    "base_selector": "li.product",
    "fields": [
        {"name": "title", "selector": "h2", "type": "text"},
        {"name": "link", "selector": "a", "type": "attribute", "attribute": "href"},
        {"name": "price", "selector": ".price", "type": "number"},
        {"name": "tags", "selector": ".tag", "type": "list"},
        {
            "name": "seller",
            "selector": ".seller",
            "type": "nested",
            "fields": [
                {"name": "name", "selector": ".name"},
                {"name": "url", "selector": "a", "type": "attribute", "attribute": "href"},
            ],
        },
        {"name": "stock", "selector": ".stock", "default": "unknown"},
    ],
}


def _read(schema: dict[str, object], html: str = PRODUCTS) -> object:
    extractor = SelectorExtractor(ExtractSchema.model_validate(schema))
    return extractor.extract(
        ExtractionInput(tree=LexborHTMLParser(html), base_url="https://shop.example/")
    )


def test_a_product_list_gives_one_object_per_base_match():
    """Every type reads what it says; a field that matches nothing is null or its default."""
    assert _read(SCHEMA) == [
        {
            "title": "Kettle Pro",
            "link": "/kettle",
            "price": 1299.5,
            "tags": ["steel", "2 l"],
            "seller": {"name": "Acme", "url": "/acme"},
            "stock": "unknown",
        },
        {
            "title": "Mug",
            "link": None,
            "price": 12,
            "tags": None,
            "seller": None,
            "stock": "unknown",
        },
    ]


def test_without_base_selector_the_page_is_one_object():
    schema = {
        "fields": [
            {"name": "heading", "selector": "h1"},
            {
                "name": "names",
                "selector": "li.product",
                "type": "list",
                "fields": [{"name": "n", "selector": "h2"}],
            },
            {"name": "first", "selector": "li", "type": "html"},
        ]
    }
    result = _read(schema)
    assert isinstance(result, dict)
    assert result["heading"] == "Shop"
    assert result["names"] == [{"n": "Kettle Pro"}, {"n": "Mug"}]
    assert str(result["first"]).startswith('<li class="product"><h2>')


def test_a_field_without_selector_reads_the_base_element_itself():
    schema = {
        "base_selector": "a",
        "fields": [{"name": "href", "type": "attribute", "attribute": "href"}],
    }
    assert _read(schema) == [{"href": "/kettle"}, {"href": "/acme"}]


def test_no_base_match_gives_an_empty_list():
    assert _read({"base_selector": "table", "fields": [{"name": "x"}]}) == []


@pytest.mark.parametrize(
    ("text", "number"),
    [("$1,299.50", 1299.5), ("12 items", 12), ("-3", -3), ("price: .5", 0.5), ("n/a", None)],
)
def test_numbers_are_the_first_number_in_the_text(text: str, number: float | None):
    assert parse_number(text) == number
