"""A page's meta refresh is read from its HTML as the HTML standard parses it."""

from __future__ import annotations

import pytest

from service.browser.meta_refresh import MAX_TAG_CHARS, Refresh, meta_refresh, parse_refresh

PAGE = "http://site.example/dir/page"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0;url=/ok", Refresh(delay_s=0, url="http://site.example/ok")),
        ("0; URL='next'", Refresh(delay_s=0, url="http://site.example/dir/next")),
        ('3 , url = "http://other.example/a"', Refresh(delay_s=3, url="http://other.example/a")),
        ("5", Refresh(delay_s=5, url=PAGE)),
        ("2.9; url=/x", Refresh(delay_s=2, url="http://site.example/x")),
        (".5;url=/x", Refresh(delay_s=0, url="http://site.example/x")),
        ("  1  /later", Refresh(delay_s=1, url="http://site.example/later")),
        ("1;javascript:alert(1)", Refresh(delay_s=1, url="javascript:alert(1)")),
        ("soon; url=/x", None),
        ("1x; url=/x", None),
        ("", None),
    ],
)
def test_content_values(content, expected):
    assert parse_refresh(content, PAGE) == expected


def test_the_first_declaration_in_a_document_counts():
    html = (
        '<html><head><META HTTP-EQUIV=Refresh CONTENT="0; url=/first&amp;x=1">'
        '<meta http-equiv="refresh" content="0; url=/second"></head></html>'
    )
    assert meta_refresh(html, PAGE) == Refresh(delay_s=0, url="http://site.example/first&x=1")


def test_attribute_order_and_quotes_do_not_matter():
    html = "<meta content='7;url=/q' http-equiv='refresh'>"
    assert meta_refresh(html, PAGE) == Refresh(delay_s=7, url="http://site.example/q")


@pytest.mark.parametrize(
    "html",
    [
        "<p>No refresh here</p>",
        "<p>http-equiv=refresh in text</p>",
        '<meta http-equiv="refresh">',
        '<meta http-equiv="content-type" content="text/html">',
        '<meta http-equiv="refresh"' + " " * (MAX_TAG_CHARS + 1) + 'content="0;url=/x">',
    ],
)
def test_pages_without_a_usable_declaration(html):
    assert meta_refresh(html, PAGE) is None


def test_a_declaration_after_megabytes_of_text_is_found():
    """The document is scanned, never parsed."""
    html = "<p>" + "http-equiv " * 200_000 + '</p><meta http-equiv=refresh content="1;url=/z">'
    assert meta_refresh(html, PAGE) == Refresh(delay_s=1, url="http://site.example/z")


def test_a_mention_in_text_before_the_tag_is_skipped():
    html = '<p>Use http-equiv="refresh" to redirect.</p><meta http-equiv=refresh content=0;url=/t>'
    assert meta_refresh(html, PAGE) == Refresh(delay_s=0, url="http://site.example/t")


def test_a_target_that_is_no_url_is_no_refresh():
    assert parse_refresh("0; url=http://[::1/x", PAGE) is None
