"""Cutting a long answer: the window, its continuation note, a document rendered as text, and
the job cursor that resumes inside a page of documents."""

from __future__ import annotations

import pytest

from service.mcp._errors import ArgumentError
from service.mcp._paging import JobCursor, fit, token_of
from service.mcp._render import document_text, window


def test_a_text_within_the_budget_is_whole_and_has_no_note():
    cut = window("short text", 0, budget=100)
    assert (cut.text, cut.cut, cut.note("firecrawl_scrape")) == ("short text", False, "")


def test_a_long_text_is_cut_at_a_line_break_and_the_note_gives_the_next_offset():
    text = "".join(f"line {n:04d}\n" for n in range(100))  # 10 characters a line
    cut = window(text, 0, budget=95)
    assert cut.text.endswith("\n")
    assert cut.end == 90
    assert "offset=90" in cut.note("firecrawl_scrape")
    rest = window(text, cut.end, budget=10_000)
    assert cut.text + rest.text == text
    assert not rest.cut


def test_successive_windows_give_back_the_whole_text_without_a_line_break():
    text = "x" * 250
    parts, offset = [], 0
    while True:
        cut = window(text, offset, budget=100)
        parts.append(cut.text)
        if not cut.cut:
            break
        offset = cut.end
    assert "".join(parts) == text
    assert len(parts) == 3


def test_a_document_reads_markdown_first_then_its_other_fields_as_json():
    text = document_text(
        {"metadata": {"title": "T"}, "html": "<p>h</p>", "markdown": "# M", "links": ["u"]}
    )
    assert text.startswith("# M\n\n<p>h</p>")
    assert '"title": "T"' in text
    assert '"links"' in text


def test_a_job_cursor_round_trips_and_a_foreign_one_is_refused():
    cursor = JobCursor(page="YzEuMTIuMw", skip=7)
    assert JobCursor.parse(cursor.encode()) == cursor
    assert JobCursor.parse(None) == JobCursor()
    assert JobCursor.parse("~0") == JobCursor()
    with pytest.raises(ArgumentError, match="cursor"):
        JobCursor.parse("not-ours")


def test_the_gateway_token_is_read_from_its_next_url():
    assert token_of("http://g/v2/crawl/abc?cursor=YzEuMTIuMw") == "YzEuMTIuMw"
    assert token_of(None) is None


def _doc(n: int, size: int) -> dict:
    return {"markdown": "m" * size, "metadata": {"sourceURL": f"http://site/{n}"}}


def test_documents_are_fitted_whole_until_the_budget_and_at_least_one():
    fitted = fit([_doc(n, 40) for n in range(10)], budget=500)
    assert 1 < fitted.taken < 10
    assert fitted.used <= 500
    assert fitted.documents == [_doc(n, 40) for n in range(fitted.taken)]


def test_a_document_larger_than_the_budget_alone_is_cut_and_says_so():
    fitted = fit([_doc(0, 500), _doc(1, 10)], budget=200)
    assert fitted.taken == 1
    assert "firecrawl_scrape its URL with offset=" in fitted.parts[0]
    assert fitted.documents[0]["cut"]["total"] > 200
    assert fitted.documents[0]["metadata"]["sourceURL"] == "http://site/0"
