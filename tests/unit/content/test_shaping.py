"""Content shaping: what `only_main_content`, `include_tags` and `exclude_tags` keep."""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from service.content.shaping import Shaping, shaped

PAGE = """<html><body>
<header id="top"><nav><a href="/">Home</a></nav><h1>Site name</h1></header>
<div id="cookie-banner">We use cookies <button>Accept</button></div>
<div class="Consent-Dialog">Your privacy choices</div>
<aside class="sidebar"><nav>Side links</nav>Related posts</aside>
<main><article><header><h1>Article title</h1></header>
<p>Body text <span class="ad">Buy now</span></p><footer>By the author</footer></article></main>
<div role="dialog">Subscribe!</div>
<footer>(c) the site</footer>
</body></html>"""


def _body(shaping: Shaping, html: str = PAGE) -> str:
    body = shaped(LexborHTMLParser(html), shaping).body
    assert body is not None
    return " ".join(body.text(separator=" ").split())


def test_main_content_keeps_the_article_and_drops_what_surrounds_it():
    """Site header, navigation, sidebar, cookie and consent banners, dialog and footer go;
    the article keeps its own header and footer."""
    assert _body(Shaping(only_main_content=True)) == (
        "Article title Body text Buy now By the author"
    )


def test_a_banner_that_wraps_the_main_content_is_kept():
    """A wrapper whose class names consent but holds the main element is not a banner."""
    html = '<body><div class="consent-given"><main><p>Content</p></main></div></body>'
    assert _body(Shaping(only_main_content=True), html) == "Content"


def test_include_tags_keep_only_the_outermost_matches_in_document_order():
    """An element inside another match is not repeated; order is the document's."""
    shaping = Shaping(include=("p", "article", "aside"))
    assert _body(shaping) == (
        "Side links Related posts Article title Body text Buy now By the author"
    )


def test_exclude_tags_drop_matches_also_inside_included_parts():
    """Excluded elements are gone before the included ones are taken."""
    assert _body(Shaping(include=("article",), exclude=(".ad", "footer"))) == (
        "Article title Body text"
    )


def test_nested_excluded_matches_are_dropped_once():
    """A match inside another match goes with it (no double free)."""
    html = "<body><div class=x><div class=x><p>in</p></div></div><p>out</p></body>"
    assert _body(Shaping(exclude=(".x", "div")), html) == "out"


def test_include_tags_that_match_nothing_give_an_empty_page():
    assert _body(Shaping(include=("table",))) == ""


def test_no_shaping_leaves_the_tree_as_it_is():
    tree = LexborHTMLParser(PAGE)
    assert shaped(tree, Shaping()) is tree
    assert not Shaping().shapes
