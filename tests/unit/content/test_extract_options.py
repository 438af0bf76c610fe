"""The content options in one extraction: what shaping narrows and what it leaves whole."""

from __future__ import annotations

from service.content.extract import extract
from service.content.schema_extract import extractor_for
from service.content.shaping import Shaping
from service.contracts import ExtractSchema, Format

PAGE = """<html><head><title>Shop</title>
<meta property="og:title" content="The shop">
<script type="application/ld+json">{"@type": "Store"}</script></head><body>
<nav><a href="/home">Home</a></nav>
<main><ul><li class="p"><h2>Kettle</h2></li><li class="p"><h2>Mug</h2></li></ul></main>
<aside><ul><li class="p"><h2>Sponsored</h2></li></ul></aside>
</body></html>"""

FORMATS = (Format.MARKDOWN, Format.LINKS, Format.METADATA, Format.STRUCTURED_DATA)


def test_shaping_narrows_markdown_and_json_but_not_links_or_metadata():
    """A deep crawl still follows the navigation; the metadata is the page's."""
    schema = ExtractSchema.model_validate(
        {"base_selector": "li.p", "fields": [{"name": "name", "selector": "h2"}]}
    )
    extracted = extract(
        PAGE,
        base_url="https://shop.example/",
        formats=FORMATS,
        shaping=Shaping(only_main_content=True),
        extractor=extractor_for(schema),
    )
    assert extracted.json_data == [{"name": "Kettle"}, {"name": "Mug"}]
    assert "Home" not in (extracted.markdown or "")
    assert "Sponsored" not in (extracted.markdown or "")
    assert extracted.links is not None
    assert extracted.links.internal == ["https://shop.example/home"]
    assert extracted.structured_data is not None
    assert extracted.structured_data.json_ld == [{"@type": "Store"}]
    assert extracted.structured_data.open_graph == {"og:title": "The shop"}


def test_without_the_options_nothing_new_is_made():
    extracted = extract(PAGE, base_url="https://shop.example/", formats=(Format.MARKDOWN,))
    assert (extracted.json_data, extracted.structured_data) == (None, None)
    assert "Sponsored" in (extracted.markdown or "")
