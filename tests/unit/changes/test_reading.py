"""What change tracking reads of a page: noise leaves the hash alone, content changes it."""

from __future__ import annotations

import pytest

from service.changes import read_html, shaping_of
from service.changes.compare import unified_diff
from service.contracts import CrawlOptions

BASE = "http://site.test/"


def _page(body: str, head: str = "") -> str:
    return f"<html><head><title>T</title>{head}</head><body>{body}</body></html>"


def _sha(html: str, *, ignore: tuple[str, ...] = (), **options: object) -> str:
    shaping = shaping_of(CrawlOptions(**options), ignore)  # type: ignore[arg-type]
    return read_html(html, base_url=BASE, shaping=shaping).sha256


PLAIN = _page("<main><h1>Prices</h1><p>Tea costs 3 EUR.</p></main>")


@pytest.mark.parametrize(
    ("name", "noisy"),
    [
        (
            "script",
            _page("<main><h1>Prices</h1><p>Tea costs 3 EUR.</p></main><script>n=7</script>"),
        ),
        (
            "style",
            _page("<main><h1>Prices</h1><p>Tea costs 3 EUR.</p></main>", "<style>p{}</style>"),
        ),
        (
            "clock",
            _page("<main><h1>Prices</h1><p>Tea costs 3 EUR.<time>09:14:03</time></p></main>"),
        ),
        (
            "nonce",
            _page(
                "<main><h1>Prices</h1><p>Tea costs 3 EUR.</p>"
                '<input type="hidden" name="csrf" value="8f2a"></main>'
            ),
        ),
        (
            "attributes",
            _page('<main class="v2"><h1 id="x">Prices</h1><p>Tea costs 3 EUR.</p></main>'),
        ),
        ("whitespace", _page("<main>\n  <h1>Prices</h1>\n\n<p>Tea   costs\n3 EUR.</p> </main>")),
        (
            "comment",
            _page("<main><h1>Prices</h1><!-- built 12:00 --><p>Tea costs 3 EUR.</p></main>"),
        ),
        (
            "hidden",
            _page("<main><h1>Prices</h1><p>Tea costs 3 EUR.</p><div hidden>token</div></main>"),
        ),
    ],
)
def test_noise_leaves_the_reading_as_it_was(name: str, noisy: str):
    """Scripts, styles, `<time>`, hidden inputs, attributes, whitespace, comments and hidden
    elements do not change a page's hash."""
    assert _sha(noisy) == _sha(PLAIN), name


def test_a_changed_word_changes_the_reading():
    assert _sha(PLAIN.replace("3 EUR", "4 EUR")) != _sha(PLAIN)


def test_ignore_selectors_and_the_requests_shaping_decide_what_is_compared():
    """A change inside an `ignore`d element, or outside the main content a request reads,
    is not a change; inside the content it is."""
    ad = _page("<main><p>Tea costs 3 EUR.</p><div class='ad'>Buy now {}</div></main>")
    assert _sha(ad.format(1), ignore=(".ad",)) == _sha(ad.format(2), ignore=(".ad",))
    assert _sha(ad.format(1)) != _sha(ad.format(2))
    nav = _page("<nav>Visitors: {}</nav><main><p>Tea costs 3 EUR.</p></main>")
    assert _sha(nav.format(1), only_main_content=True) == _sha(
        nav.format(2), only_main_content=True
    )


def test_the_diff_shows_the_old_and_the_new_line():
    old = read_html(PLAIN, base_url=BASE, shaping=shaping_of(CrawlOptions(), ()))
    new = read_html(
        PLAIN.replace("3 EUR", "4 EUR"), base_url=BASE, shaping=shaping_of(CrawlOptions(), ())
    )
    diff = unified_diff(old.markdown or "", new.markdown or "")
    assert "-Tea costs 3 EUR." in diff.splitlines()
    assert "+Tea costs 4 EUR." in diff.splitlines()
