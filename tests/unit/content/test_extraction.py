from __future__ import annotations

import threading

import pytest

from service.content.extract import Extracted, HtmlTooComplexError, extract
from service.contracts import Format
from service.errors import PermanentError

PAGE_URL = "https://example.com/dir/page.html"
EVERYTHING = frozenset(Format)

PAGE = """<!doctype html>
<html lang=" en-GB ">
<head>
  <title>  Hello
     World </title>
  <meta name="Description" content="  A   page about things ">
  <meta property="og:title" content="OG title">
  <meta property="og:image" content="https://cdn.example.com/i.png">
  <meta property="og:title" content="second og:title is ignored">
  <link rel="icon Canonical" href="/canonical#frag">
  <style>.hidden { display: none }</style>
  <script>var s = "<p>not text</p>";</script>
</head>
<body>
  <h1>Main   heading</h1>
  <p>First paragraph
     spans lines with <b>bold</b> text<br>and a break.</p>
  <div>Block <span>with inline</span> parts</div>
  <ul><li>one</li><li>two</li></ul>
  <ol start="3"><li>three</li><li>four</li></ol>
  <table><tr><th>name</th><th>age</th></tr><tr><td>ada</td><td>36</td></tr></table>
  <pre>line one
line two</pre>
  <noscript>enable javascript</noscript>
  <template><p>template content</p></template>
  <p hidden>hidden paragraph</p>
  <svg><title>icon title</title><text>svg text</text></svg>
  <a href="relative.html">relative</a>
  <a href="/rooted#section">rooted</a>
  <a href="/rooted#other">rooted again</a>
  <a href="#top">fragment only</a>
  <a href="//example.com/protocol-relative">protocol relative</a>
  <a href="https://other.org/x">other host</a>
  <a href="http://www.example.com/www">www is another host</a>
  <a href="mailto:someone@example.com">mail</a>
  <a href="javascript:alert(1)">script</a>
  <a href="http://[::1">broken</a>
  <a href="http://example.com:99999/">bad port</a>
  <a href=" https://other.org/x ">duplicate with spaces</a>
  <img src="img/pic.png" alt="a picture">
</body>
</html>"""


@pytest.fixture(scope="module")
def page() -> Extracted:
    return extract(PAGE, base_url=PAGE_URL, formats=EVERYTHING)


def test_title_is_stripped_and_collapsed(page):
    """The title reads like document.title: whitespace stripped and collapsed."""
    assert page.title == "Hello World"


def test_metadata_fields(page):
    """Description, language, canonical and Open Graph come from the head."""
    metadata = page.metadata
    assert metadata is not None
    assert metadata.title == "Hello World"
    assert metadata.description == "A page about things"
    assert metadata.language == "en-GB"
    assert metadata.canonical == "https://example.com/canonical"
    assert metadata.open_graph == {"title": "OG title", "image": "https://cdn.example.com/i.png"}


def test_links_are_absolute_deduplicated_and_split_by_host(page):
    """Links resolve against the page, lose fragments, keep http(s) only, dedupe in order."""
    links = page.links
    assert links is not None
    assert links.internal == [
        "https://example.com/dir/relative.html",
        "https://example.com/rooted",
        "https://example.com/protocol-relative",
    ]
    assert links.external == ["https://other.org/x", "http://www.example.com/www"]


def test_text_is_visible_text_one_block_per_line(page):
    """Scripts, styles, noscript, templates, svg and hidden elements leave no text."""
    lines = (page.text or "").splitlines()
    assert lines[:12] == [
        "Main heading",
        "First paragraph spans lines with bold text",
        "and a break.",
        "Block with inline parts",
        "one",
        "two",
        "three",
        "four",
        "name age",
        "ada 36",
        "line one",
        "line two",
    ]
    for invisible in ("not text", "enable javascript", "template", "hidden", "icon", "svg"):
        assert invisible not in (page.text or "")
    assert "" not in lines


def test_markdown_has_atx_headings_and_absolute_links(page):
    """Markdown uses `#` headings, keeps lists and tables, and makes link targets absolute."""
    markdown = page.markdown or ""
    assert markdown.startswith("# Main heading\n")
    assert "text\\\nand a break." in markdown
    assert "3. three\n4. four" in markdown
    assert "| name | age |" in markdown
    assert "[relative](https://example.com/dir/relative.html)" in markdown
    assert "![a picture](https://example.com/dir/img/pic.png)" in markdown
    assert "\n\n\n" not in markdown
    for invisible in ("not text", "enable javascript", "icon title", "hidden paragraph"):
        assert invisible not in markdown


def test_html_is_the_input(page):
    assert page.html == PAGE


@pytest.mark.parametrize(
    ("formats", "filled"),
    [
        ({Format.LINKS}, {"links"}),
        ({Format.METADATA}, {"metadata"}),
        ({Format.TEXT}, {"text"}),
        ({Format.MARKDOWN}, {"markdown"}),
        ({Format.HTML}, {"html"}),
        ({Format.SCREENSHOT}, set()),
        ({Format.TEXT, Format.MARKDOWN}, {"text", "markdown"}),
    ],
)
def test_only_requested_formats_are_filled(formats, filled):
    """Each output is None unless asked for; the title is always there."""
    result = extract(PAGE, base_url=PAGE_URL, formats=formats)
    assert result.title == "Hello World"
    fields = ("markdown", "text", "html", "links", "metadata")
    assert {name for name in fields if getattr(result, name) is not None} == filled


def test_base_href_changes_link_resolution_but_not_the_page_host():
    """Links resolve against `<base href>`; internal still means the page's own host."""
    html = (
        '<base href="https://cdn.example.net/assets/">'
        '<a href="x.html">x</a><a href="https://example.com/y">y</a>'
    )
    links = extract(html, base_url=PAGE_URL, formats={Format.LINKS}).links
    assert links is not None
    assert links.internal == ["https://example.com/y"]
    assert links.external == ["https://cdn.example.net/assets/x.html"]


def test_host_comparison_ignores_case():
    links = extract(
        '<a href="https://EXAMPLE.com/a">a</a>', base_url=PAGE_URL, formats={Format.LINKS}
    ).links
    assert links is not None
    assert links.internal == ["https://EXAMPLE.com/a"]


def test_backslashes_in_a_link_path_mean_slashes():
    """`/a\\b` goes where a browser goes: `/a/b`."""
    links = extract('<a href="/a\\b?q=\\">x</a>', base_url=PAGE_URL, formats={Format.LINKS}).links
    assert links is not None
    assert links.internal == ["https://example.com/a/b?q=\\"]


@pytest.mark.parametrize(
    "html",
    [
        "",
        "   ",
        "just text, no tags",
        "<<<>>><//><a href=>",
        "<html><frameset><frame src=x></frameset></html>",
        "\x00<p>a\x00b</p>",
        "<p>lone surrogate \ud800 here</p>",
        "<table><td>unclosed <b><i>misnested</b></i>",
        "<svg><title>only svg</title></svg>",
        '<meta property="og:" content="empty key"><link rel=canonical href="javascript:x">',
    ],
)
def test_garbage_and_empty_input_do_not_fail(html):
    """Whatever the HTML, extraction returns a result of the right shape."""
    result = extract(html, base_url=PAGE_URL, formats=EVERYTHING)
    assert result.markdown is not None
    assert result.text is not None
    assert "\x00" not in result.text
    assert result.links is not None
    assert result.metadata is not None
    assert result.metadata.open_graph == {}
    assert result.metadata.canonical is None


def test_empty_page_has_empty_outputs():
    result = extract("", base_url=PAGE_URL, formats=EVERYTHING)
    assert result.title is None
    assert result.markdown == ""
    assert result.text == ""
    assert result.links is not None
    assert result.links.internal == []


@pytest.mark.timeout(60)
def test_pathological_nesting_is_refused_quickly():
    """A document of a million unclosed divs is refused instead of parsed for hours."""
    with pytest.raises(HtmlTooComplexError) as caught:
        extract("<div>" * 1_000_000, base_url=PAGE_URL, formats=EVERYTHING)
    assert isinstance(caught.value, PermanentError)


def test_deep_but_bounded_nesting_falls_back_to_text_for_markdown():
    """Nesting too deep for the Markdown converter yields the text instead of an error."""
    html = "<div>" * 3000 + "deep content" + "</div>" * 3000
    result = extract(html, base_url=PAGE_URL, formats={Format.MARKDOWN})
    assert result.markdown == "deep content"


@pytest.mark.timeout(120)
def test_a_50_mb_page_is_extracted():
    """A 50 MB page is parsed once; outputs cover all of it."""
    paragraph = "<p>" + "word " * 2000 + '<a href="/p">link</a></p>\n'
    html = "<title>big</title>" + paragraph * (50_000_000 // len(paragraph))
    result = extract(html, base_url=PAGE_URL, formats=EVERYTHING - {Format.MARKDOWN})
    assert result.title == "big"
    assert result.links is not None
    assert result.links.internal == ["https://example.com/p"]
    assert (result.text or "").count("\n") == html.count("<p>") - 1


def test_markdown_keeps_navigation_and_forms():
    """Nothing visible is left out of the Markdown as boilerplate: the text keeps it too."""
    html = '<nav><a href="/home">home</a></nav><form><label>your name</label></form><p>body</p>'
    markdown = extract(html, base_url=PAGE_URL, formats={Format.MARKDOWN}).markdown or ""
    assert "[home](https://example.com/home)" in markdown
    assert "your name" in markdown


def test_a_long_ordered_list_converts_in_linear_time():
    """Every item of a long ordered list is numbered, without quadratic work."""
    html = "<ol>" + "<li>item</li>" * 20_000 + "</ol>"
    markdown = extract(html, base_url=PAGE_URL, formats={Format.MARKDOWN}).markdown or ""
    assert markdown.splitlines()[-1] == "20000. item"


def test_threads_extract_side_by_side():
    """Concurrent calls in threads (as asyncio.to_thread runs them) give identical results."""
    expected = extract(PAGE, base_url=PAGE_URL, formats=EVERYTHING)
    results: list[Extracted] = []

    def work() -> None:
        results.extend(extract(PAGE, base_url=PAGE_URL, formats=EVERYTHING) for _ in range(20))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 80
    assert all(result == expected for result in results)
