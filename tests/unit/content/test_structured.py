"""The `structured_data` format: JSON-LD, microdata and Open Graph, parsed."""

from __future__ import annotations

from service.content.structured import structured_data

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
