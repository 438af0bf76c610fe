"""One content model: the wire result extends `PageFields`, the fetcher's `PageContent` fills
it, and every output the extraction produces lands in the result under its own name (pure)."""

from __future__ import annotations

import dataclasses
import typing
from datetime import UTC, datetime

import pytest
from pydantic import JsonValue

from service.content.extract import Extracted, FollowRules, Outlinks, extract
from service.content.page import FETCHER_ONLY, PageContent, failed, page_content
from service.content.schema_extract import extractor_for
from service.content.shaping import Shaping
from service.contracts import (
    CrawlOptions,
    ErrorCode,
    Format,
    Links,
    PageFields,
    PageMetadata,
    PageResult,
    StructuredData,
)

RESULT_ONLY = frozenset(
    {
        "request_id", "result_id", "run_id", "url", "elapsed_ms", "fetched_at", "worker",
        "request_metadata", "source", "depth", "parent_url", "schema_version",
    }
)  # fmt: skip
"""Result fields the fetcher adds around the content (who, where, when)."""

URL = "http://site.test/page"

PAGE = """<!doctype html><html lang="en"><head><title>Bolts</title>
<meta name="description" content="All the bolts">
<link rel="canonical" href="/page">
<meta property="og:title" content="Bolts">
<script type="application/ld+json">{"@type": "Product", "name": "Bolt"}</script>
</head><body><main><h1>Bolts</h1><p class="price">4.50</p>
<a href="/nuts">Nuts</a> <a href="http://other.test/">Elsewhere</a></main></body></html>"""

OPTIONS = CrawlOptions.model_validate(
    {
        "formats": [
            Format.MARKDOWN,
            Format.TEXT,
            Format.HTML,
            Format.LINKS,
            Format.METADATA,
            Format.STRUCTURED_DATA,
        ],
        "extract": {"fields": [{"name": "price", "selector": ".price", "type": "number"}]},
    }
)


def test_the_wire_result_extends_the_one_declaration_of_the_page_fields():
    assert issubclass(PageResult, PageFields)
    assert issubclass(PageContent, PageFields)
    missing = PageResult.model_fields.keys() - PageFields.model_fields.keys() - RESULT_ONLY
    assert not missing, f"PageResult fields outside PageFields: {sorted(missing)}"


def test_the_fetchers_own_fields_are_named_and_not_on_the_wire():
    """A field added to `PageContent` rather than to `PageFields` would never reach the
    result: only the named fetcher-only fields may do that."""
    assert PageContent.model_fields.keys() - PageFields.model_fields.keys() == FETCHER_ONLY
    assert FETCHER_ONLY.isdisjoint(PageResult.model_fields)


def test_the_contents_json_is_the_page_fields_json_validated_once_on_the_result():
    """`PageContent` skips walking `json` (the `PageResult` validates it): same name, alias,
    default and type otherwise."""
    mine, wire = PageContent.model_fields["json_data"], PageFields.model_fields["json_data"]
    same = ("alias", "default", "annotation")
    assert [getattr(mine, n) for n in same] == [getattr(wire, n) for n in same]


def test_the_result_fields_are_every_page_field():
    content = failed(ErrorCode.INTERNAL, "x", final_url=URL, status_code=500)
    assert content.result_fields().keys() == PageFields.model_fields.keys()


def test_a_change_to_a_field_the_content_lacks_is_an_error_not_a_silent_loss():
    content = failed(ErrorCode.INTERNAL, "x")
    assert content.replaced(truncated=True).truncated
    with pytest.raises(TypeError, match="markdown_text"):
        content.replaced(markdown_text="words")


def test_every_extracted_field_is_a_page_field_of_the_same_type_or_the_fetchers_own():
    names = {"JsonValue": JsonValue, "Outlinks": Outlinks, "Links": Links}
    names |= {"PageMetadata": PageMetadata, "StructuredData": StructuredData}
    extracted = typing.get_type_hints(Extracted, names)
    wire = typing.get_type_hints(PageFields)  # without the validators' annotations
    assert extracted.keys() - FETCHER_ONLY <= wire.keys(), extracted.keys() - wire.keys()
    for name in extracted.keys() - FETCHER_ONLY:
        assert extracted[name] == wire[name], (name, extracted[name], wire[name])


async def test_every_output_the_extraction_produces_lands_in_the_result():
    """Each field of `Extracted` is filled from the page, and `page_content` carries it onto
    the `PageResult` unchanged (the links to follow onto the content, for the frontier)."""
    follow = FollowRules()
    extracted = extract(
        PAGE,
        base_url=URL,
        formats=OPTIONS.formats,
        follow=follow,
        shaping=Shaping.from_options(OPTIONS),
        extractor=extractor_for(OPTIONS.extract),
    )
    content = await page_content(
        status=200, final_url=URL, html=PAGE, options=OPTIONS, max_bytes=1 << 20, follow=follow
    )
    result = PageResult(
        **content.result_fields(),
        request_id="r",
        result_id="x",
        run_id="run",
        url=URL,
        elapsed_ms=1,
        fetched_at=datetime.now(UTC),
        worker="w",
    )
    for field in dataclasses.fields(Extracted):
        value = getattr(extracted, field.name)
        assert value not in (None, "", []), f"the page gives no {field.name}"
        carrier = content if field.name in FETCHER_ONLY else result
        assert getattr(carrier, field.name) == value, field.name
