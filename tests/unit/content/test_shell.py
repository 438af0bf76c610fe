"""The app-shell detector: script-rendered pages are caught, static pages are left alone."""

from __future__ import annotations

import pytest
from _html import document
from _jsapps import JS_KINDS, js_page, static_page
from _pages import article_page, index_page, simple_page

from service.content.shell import selector_present, shell_reason

LONG_TEXT = "<p>" + "A sentence a reader reads. " * 120 + "</p>"


@pytest.mark.parametrize("kind", JS_KINDS)
def test_every_script_rendered_page_of_the_corpus_is_a_shell(kind):
    """Each kind of the test site's script-rendered pages needs the browser."""
    expected = {
        "shell": "empty_root",
        "noscript": "noscript",
        "boilerplate": "empty_main",
        "widget": "thin_text",
    }
    assert [shell_reason(js_page(kind, n)) for n in range(5)] == [expected[kind]] * 5


def test_static_pages_of_the_corpus_are_not_shells():
    """Articles, the index, short pages without scripts, and a long article with an
    analytics script keep the HTTP answer."""
    pages = [article_page("http://site.test", n) for n in range(20)]
    pages += [static_page(n) for n in range(20)]
    pages += [index_page(), simple_page("Short", "<p>Two words.</p>")]
    assert [shell_reason(page) for page in pages] == [None] * len(pages)


def test_a_page_without_any_script_is_never_a_shell():
    """Nothing would change it in a browser, however empty it looks."""
    assert shell_reason(document(title="t", body='<div id="root"></div><main></main>')) is None


@pytest.mark.parametrize(
    "root",
    [
        '<div id="__next"></div>',
        '<div id="app">Loading...</div>',
        "<app-root></app-root>",
        '<div id="__nuxt"><div class="spinner"></div></div>',
    ],
)
def test_an_empty_framework_root_is_a_shell_even_beside_static_text(root):
    """Next, Vue, Angular and Nuxt roots, empty or holding a placeholder."""
    body = f"{LONG_TEXT}{root}<script src='/bundle.js'></script>"
    assert shell_reason(document(title="t", body=body)) == "empty_root"


def test_a_server_rendered_root_is_not_a_shell():
    """A framework root holding the page's text was rendered on the server."""
    body = f'<div id="root">{LONG_TEXT}</div><script src="/hydrate.js"></script>'
    assert shell_reason(document(title="t", body=body)) is None


def test_a_noscript_notice_under_a_long_article_is_not_a_shell():
    """A comment widget's "enable JavaScript" notice does not make an article a shell."""
    body = (
        f"<article>{LONG_TEXT}</article><noscript>Please enable JavaScript to view the"
        " comments.</noscript><script src='/comments.js'></script>"
    )
    assert shell_reason(document(title="t", body=body)) is None


def test_json_data_blocks_are_not_scripts():
    """`type=application/json` and templates carry data, not code that renders."""
    body = '<p>Short.</p><script type="application/json">{"a": 1}</script>'
    assert shell_reason(document(title="t", body=body)) is None


def test_little_text_beside_much_code_is_thin():
    """A few words next to a large inline bundle."""
    body = "<p>Welcome.</p><div class='x'></div><script>" + "var a=1;" * 200 + "</script>"
    assert shell_reason(document(title="t", body=body)) == "thin_text"


def test_selector_present_uses_css_and_leaves_other_engines_to_the_browser():
    html = document(title="t", body='<div id="content"><p class="x">hi</p></div>')
    assert selector_present(html, "#content p.x") is True
    assert selector_present(html, "#late") is False
    for selector in ("text=hi", "xpath=//p", "##$%^&*(", "div:has(", "_react=Foo"):
        assert selector_present(html, selector) is None, selector
