"""A PageResult as Firecrawl's document (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from service.contracts import ErrorCode, Links, PageError, PageMetadata, PageResult
from service.gateway.documents import document
from service.gateway.options import ScrapeChoices


def result(**fields) -> PageResult:
    base = {
        "request_id": "job-1",
        "result_id": "r" * 32,
        "run_id": "run",
        "url": "https://example.com/a",
        "final_url": "https://example.com/b",
        "ok": True,
        "status_code": 200,
        "markdown": "# A\n\n![x](data:image/png;base64,AAAA) text ![y](https://e.com/y.png)",
        "html": "<h1>A</h1>",
        "links": Links(internal=["https://example.com/c"], external=["https://other.example/"]),
        "metadata": PageMetadata(title="A", description="d", open_graph={"title": "OG"}),
        "screenshot": "iVBORw0KGgo=",
        "elapsed_ms": 5,
        "fetched_at": datetime(2026, 12, 1, tzinfo=UTC),
        "worker": "w1",
    }
    return PageResult.model_validate(base | fields)


def test_only_the_formats_asked_come_back_with_firecrawl_metadata():
    doc = document(result(), ScrapeChoices(formats=("markdown", "links", "screenshot")))
    assert set(doc) == {"markdown", "links", "screenshot", "metadata"}
    assert doc["links"] == ["https://example.com/c", "https://other.example/"]
    assert doc["screenshot"] == "data:image/png;base64,iVBORw0KGgo="
    meta = doc["metadata"]
    assert meta["sourceURL"] == "https://example.com/a"
    assert meta["url"] == "https://example.com/b"
    assert meta["statusCode"] == 200
    assert meta["ogTitle"] == "OG"
    assert meta["title"] == "A"


def test_base64_images_are_removed_unless_asked_to_keep_them():
    kept = document(result(), ScrapeChoices(formats=("markdown",), remove_base64_images=False))
    removed = document(result(), ScrapeChoices(formats=("markdown",)))
    assert "data:image" in kept["markdown"]
    assert "data:image" not in removed["markdown"]
    assert "https://e.com/y.png" in removed["markdown"]


def test_a_failed_page_names_its_error_in_the_metadata_and_warnings_are_passed_on():
    failed = result(
        ok=False, status_code=404, error=PageError(code=ErrorCode.HTTP_ERROR, message="404")
    )
    doc = document(failed, ScrapeChoices(formats=("html", "rawHtml"), warning="w"))
    assert doc["metadata"]["error"].startswith("http_error")
    assert doc["html"] == doc["rawHtml"] == "<h1>A</h1>"
    assert doc["warning"] == "w"
