"""The results table of `crawlstream submit --follow`: paths, not cut-off URLs, on one host."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from service.cli.follow_view import summary_table
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


def _render(results: list[PageResult]) -> str:
    console = Console(width=200, record=True)
    console.print(summary_table(results))
    return console.export_text()


def test_one_host_shows_each_page_by_its_path_and_depth() -> None:
    text = _render(
        [_result("http://127.0.0.1:8123/about.html"), _result("http://127.0.0.1:8123/a?b=1", 1)]
    )
    assert "path on 127.0.0.1:8123" in text
    assert "/about.html" in text
    assert "/a?b=1" in text


def test_several_hosts_show_whole_urls() -> None:
    text = _render([_result("http://a.test/x"), _result("http://b.test/y")])
    assert "http://a.test/x" in text
    assert "http://b.test/y" in text
