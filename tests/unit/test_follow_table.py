"""The results table of `crawlstream submit --follow` and the demo: paths on one host, sized
for the terminal."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from service.cli.results_table import summary_table
from service.contracts import PageResult


def _result(url: str, depth: int = 0) -> PageResult:
    return PageResult(
        request_id="r",
        result_id="x",
        run_id="run",
        url=url,
        ok=True,
        elapsed_ms=1,
        fetched_at=datetime.now(UTC),
        worker="w",
        depth=depth,
    )


def _render(results: list[PageResult], width: int = 200) -> str:
    console = Console(width=width, record=True)
    console.print(summary_table(results, console.width))
    return console.export_text()


def test_one_host_shows_each_page_by_its_path_and_depth() -> None:
    text = _render(
        [_result("http://127.0.0.1:8123/about.html"), _result("http://127.0.0.1:8123/a?b=1", 1)]
    )
    assert "Results from 127.0.0.1:8123" in text
    assert "/about.html" in text
    assert "/a?b=1" in text


def test_several_hosts_show_whole_urls() -> None:
    text = _render([_result("http://a.test/x"), _result("http://b.test/y")])
    assert "http://a.test/x" in text
    assert "http://b.test/y" in text


SAMPLE_TITLES = {
    "/index.html": "Crawlstream sample site",
    "/about.html": "About Crawlstream",
    "/features.html": "Crawlstream features",
    "/backpressure.html": "Memory backpressure",
    "/late.html": "Late content",
    "/contact.html": "Contact",
}
"""The demo's sample site: its paths and titles."""

HEADERS = ["path", "depth", "http", "outcome", "title", "md", "links", "ms"]


def _demo_results(base: str = "http://127.0.0.1:41234") -> list[PageResult]:
    return [
        _result(f"{base}{path}").model_copy(
            update={"title": title, "status_code": 200, "markdown": "x" * 1234, "elapsed_ms": 987}
        )
        for path, title in SAMPLE_TITLES.items()
    ]


def _lines(results: list[PageResult], width: int) -> list[str]:
    return _render(results, width).splitlines()


def test_at_80_columns_the_demo_table_fits_one_line_per_result() -> None:
    """The demo's results at 80 columns: no line wider than 80, every header whole on one line,
    one line per page."""
    lines = _lines(_demo_results(), 80)
    assert max(len(line) for line in lines) <= 80
    [header] = [line for line in lines if line.startswith("path")]
    assert header.split() == HEADERS
    rows = [line for line in lines if line.startswith("/")]
    assert [row.split()[0] for row in rows] == list(SAMPLE_TITLES)
    assert "127.0.0.1:41234" in lines[0]


def test_at_80_columns_titles_keep_more_than_their_first_word() -> None:
    """Titles take the room the short columns leave: two-word titles are whole, a longer one
    is cut with an ellipsis after its second word at the earliest."""
    text = _render(_demo_results(), 80)
    for title in ("About Crawlstream", "Memory backpressure", "Late content", "Contact"):
        assert title in text
    assert "Crawlstream sample" in text
    assert "Crawlstream features" in text or "Crawlstream featur…" in text


def test_long_urls_of_several_hosts_end_in_an_ellipsis_within_the_width() -> None:
    """Whole URLs too long for 80 columns are cut with an ellipsis, one line each."""
    long = "http://a.test/" + "section/" * 12 + "page.html"
    results = [_result(long), _result("http://b.test/y")]
    lines = _lines(results, 80)
    assert max(len(line) for line in lines) <= 80
    [cut] = [line for line in lines if line.startswith("http://a.test/")]
    assert "…" in cut
    assert any(line.startswith("http://b.test/y ") for line in lines)


def test_a_wide_terminal_shows_whole_titles_and_paths() -> None:
    """At 200 columns nothing is cut."""
    text = _render(_demo_results(), 200)
    assert "…" not in text
    assert all(title in text for title in SAMPLE_TITLES.values())
