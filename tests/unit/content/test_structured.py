"""The `structured_data` format: JSON-LD, microdata and Open Graph, parsed."""

from __future__ import annotations

import json

from service.content.structured import MAX_JSON_LD_DEPTH, cut_depth, structured_data

PAGE = """<html><head>
<meta property="og:title" content="A kettle">
<meta property="og:image" content="https://example.com/1.png">
<meta property="og:image" content="https://example.com/2.png">
<meta property="article:author" content="Jo">
<meta name="og:ignored" content="a name, not a property">
<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Product",
 "name": "Kettle", "offers": {"@type": "Offer", "price": "9.50"}}</script>
<script type="application/ld+json">{not json</script>
<script type="application/ld+json">[{"@type": "A"}, {"@type": "B"}]</script>
</head><body>
<div itemscope itemtype="https://schema.org/Product"><span itemprop="name">Mug</span>
 <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
 <span itemprop="price">4</span></div></div>
</body></html>"""


def test_json_ld_blocks_are_parsed_and_broken_ones_left_out():
    """Each block's objects in order; an array gives its items; a broken block is skipped."""
    data = structured_data(PAGE, base_url="https://example.com/")
    assert data.json_ld == [
        {
            "@context": "https://schema.org",
            "@type": "Product",
            "name": "Kettle",
            "offers": {"@type": "Offer", "price": "9.50"},
        },
        {"@type": "A"},
        {"@type": "B"},
    ]


def test_microdata_items_nest():
    data = structured_data(PAGE, base_url="https://example.com/")
    assert data.microdata == [
        {
            "type": "https://schema.org/Product",
            "properties": {
                "name": "Mug",
                "offers": {"type": "https://schema.org/Offer", "properties": {"price": "4"}},
            },
        }
    ]


def test_open_graph_keeps_prefixes_and_the_first_of_a_repeat():
    data = structured_data(PAGE, base_url="https://example.com/")
    assert data.open_graph == {
        "og:title": "A kettle",
        "og:image": "https://example.com/1.png",
        "article:author": "Jo",
    }


def test_a_page_without_structured_data_gives_empty_parts():
    for html in ("", "<p>plain</p>"):
        data = structured_data(html, base_url="https://example.com/")
        assert (data.json_ld, data.microdata, data.open_graph) == ([], [], {})


def test_json_ld_nested_past_the_depth_is_cut_not_a_crash() -> None:
    """100,000 nested arrays become `null` past `MAX_JSON_LD_DEPTH`; the rest is kept."""
    deep = "[" * 100_000 + "]" * 100_000
    block = '{"@type": "Thing", "name": "deep", "hasPart": ' + deep + "}"
    html = f'<html><head><script type="application/ld+json">{block}</script></head></html>'
    [thing] = structured_data(html, base_url="https://a.test/").json_ld
    assert thing["name"] == "deep"
    assert 0 < json.dumps(thing).count("[") <= MAX_JSON_LD_DEPTH


def test_cut_depth_skips_brackets_in_strings() -> None:
    assert cut_depth('{"a": [1, {"b": "[{"}, [[[2]]]]}', 2) == '{"a": [1, null, null]}'
    assert cut_depth('["]]]", [1]]', 5) == '["]]]", [1]]'
