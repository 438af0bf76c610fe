"""PDF text and metadata, from PDFs generated here."""

from __future__ import annotations

import io

import pytest
from fpdf import FPDF
from PIL import Image

from service.content.pdf import PdfUnreadableError, is_pdf, read_pdf


def _pdf(pages: int, *, title: str = "Report", author: str = "Jo Bloggs") -> bytes:
    document = FPDF()
    document.set_title(title)
    document.set_author(author)
    document.set_font("helvetica", size=12)
    for number in range(1, pages + 1):
        document.add_page()
        document.multi_cell(0, 10, f"Page {number} begins.\nPage {number} ends.")
    return bytes(document.output())


def test_pages_come_in_order_with_the_metadata():
    text = read_pdf(_pdf(3), 100)
    assert text.pages == tuple(f"Page {n} begins.\nPage {n} ends." for n in (1, 2, 3))
    assert (text.page_count, text.title, text.author) == (3, "Report", "Jo Bloggs")
    assert not text.truncated
    assert text.text_layer


def test_pages_beyond_the_limit_are_not_read_but_counted():
    text = read_pdf(_pdf(5), 2)
    assert len(text.pages) == 2
    assert text.page_count == 5
    assert text.truncated


def test_a_scan_has_no_text_layer():
    """A page that is only an image has no text: the document says so."""
    image = io.BytesIO()
    Image.new("RGB", (200, 100), "white").save(image, format="PNG")
    document = FPDF()
    document.add_page()
    document.image(image, x=10, y=10, w=100)
    text = read_pdf(bytes(document.output()), 100)
    assert text.page_count == 1
    assert not text.text_layer
    assert text.text == ""


def test_bytes_that_are_no_pdf_are_unreadable():
    with pytest.raises(PdfUnreadableError, match="not a readable PDF"):
        read_pdf(b"%PDF-1.7 but nothing else", 1)


def test_a_pdf_is_known_by_its_content_type():
    assert is_pdf("application/pdf")
    assert is_pdf("Application/PDF; qs=0.5")
    assert is_pdf("application/x-pdf")
    assert not is_pdf("application/octet-stream")


def test_pages_stop_at_the_text_and_time_limits() -> None:
    """A PDF's pages stop once the text read passes `max_chars` or `max_seconds` passed."""
    by_chars = read_pdf(_pdf(5), 100, 1)
    assert len(by_chars.pages) == 1
    assert by_chars.truncated
    by_time = read_pdf(_pdf(5), 100, None, 0)
    assert by_time.pages == ()
    assert by_time.page_count == 5
