"""Bodies of the test site's ordinary pages; pure functions of their parameters."""

from __future__ import annotations

import functools
import random
from typing import TYPE_CHECKING

from _html import document, escape, filler, script_literal, section

if TYPE_CHECKING:
    from collections.abc import Iterator

PAGE_MIN_BYTES = 32_000
"""Smallest `/page/{n}` body; stays above 30 KB whether a KB is 1000 or 1024 bytes."""

PAGE_SIZE_SPREAD = 26_000
"""Range added on top of PAGE_MIN_BYTES, so the largest page stays under 60 KB."""

PAGE_ID_SPACE = 1_000
"""Internal links point at `/page/{m}` with m below this, so crawls revisit pages."""

INTERNAL_LINKS = 14
"""Internal `/page/{m}` links on each page."""

EXTERNAL_SITES = ("https://example.com", "https://other.test")
"""Origins of the external links on each page."""

EXTERNAL_LINKS_PER_SITE = 3
"""External links per origin on each page."""

INDEX_PAGES = 10
"""Pages linked from the site's index."""

MULTIBYTE_LINE = "é€" + "😀" * 24
"""A line of `/multibyte` text: characters of two, three and (mostly) four UTF-8 bytes, so a
cut at an arbitrary byte offset almost always falls inside a character."""

MULTIBYTE_LINES_PER_PARAGRAPH = 40
"""Lines in one `<p>` of `/multibyte`."""


@functools.lru_cache(maxsize=1024)
def article_page(base_url: str, n: int) -> str:
    """`/page/{n}`: full metadata, about 20 links and filler sized by a seed of n (kept once
    made: 1.8 CPU ms a page, asked for thousands of times a suite run)."""
    rng = random.Random(n)
    target = PAGE_MIN_BYTES + rng.randrange(PAGE_SIZE_SPREAD)
    head = _article_head(base_url, n)
    top = f"<header><h1>Page {n}</h1>\n<nav>\n{_links(rng, n)}</nav></header>\n<main>\n"
    bottom = "</main>\n<footer><p>Crawlstream test site</p></footer>"
    skeleton = len(document(title=f"Page {n}", head=head, body=top + bottom))
    body = top + filler(rng, target - skeleton) + bottom
    return document(title=f"Page {n}", head=head, body=body)


def _article_head(base_url: str, n: int) -> str:
    description = f"Deterministic test page number {n} of the Crawlstream test site."
    return (
        f'<meta name="description" content="{escape(description)}">\n'
        f'<link rel="canonical" href="{escape(base_url)}/page/{n}">\n'
        f'<meta property="og:title" content="Page {n}">\n'
        f'<meta property="og:description" content="{escape(description)}">\n'
        '<meta property="og:type" content="article">\n'
    )


def _links(rng: random.Random, n: int) -> str:
    targets = [f"/page/{n + 1}"]
    targets += [f"/page/{rng.randrange(PAGE_ID_SPACE)}" for _ in range(INTERNAL_LINKS - 1)]
    for origin in EXTERNAL_SITES:
        targets += [f"{origin}/article/{n}-{i}" for i in range(EXTERNAL_LINKS_PER_SITE)]
    return "".join(f'<a href="{href}">Link {i}</a>\n' for i, href in enumerate(targets))


def index_page() -> str:
    """`/`: a starting point that links to the first pages."""
    items = "".join(f'<li><a href="/page/{n}">Page {n}</a></li>\n' for n in range(INDEX_PAGES))
    return simple_page("Crawlstream test site", f"<ul>\n{items}</ul>")


def simple_page(title: str, content: str) -> str:
    """A short page with a title, a description and the given (already escaped) content."""
    head = f'<meta name="description" content="{escape(title)}">\n'
    return document(title=title, head=head, body=f"<h1>{escape(title)}</h1>\n{content}")


def late_page(delay_ms: int, label: int) -> str:
    """`/js/late`: the main content appears only after a timer started at DOMContentLoaded."""
    text = script_literal(f"Late content {label}")
    script = (
        "<script>\ndocument.addEventListener('DOMContentLoaded', () => {\n"
        f"  setTimeout(() => {{\n    const late = document.createElement('div');\n"
        f"    late.id = 'late';\n    late.textContent = {text};\n"
        f"    document.querySelector('main').appendChild(late);\n  }}, {delay_ms});\n}});\n"
        "</script>"
    )
    return simple_page("Late content", f"<main><p>Loading.</p></main>\n{script}")


def alloc_page(mb: int, hold: bool) -> str:
    """`/alloc`: a script fills `mb` MiB of typed arrays, then writes `#done`."""
    keep = "window.__crawlstreamHold = keep;" if hold else ""
    script = (
        "<script>\nconst keep = [];\n"
        f"for (let i = 0; i < {mb}; i++) {{\n"
        "  const chunk = new Uint8Array(1024 * 1024);\n  chunk.fill(i % 251 + 1);\n"
        f"  keep.push(chunk);\n}}\n{keep}\n"
        "const done = document.createElement('div');\ndone.id = 'done';\n"
        "done.textContent = 'allocated';\ndocument.body.appendChild(done);\n</script>"
    )
    return simple_page(f"Allocate {mb} MB", script)


def status_page(code: int) -> str:
    """A small body for an error or other non-200 status."""
    return simple_page(f"Status {code}", f"<p>The test site answered {code}.</p>")


def large_page(total_bytes: int) -> str:
    """A valid page of repeated sections, at least `total_bytes` long."""
    return "".join(large_page_chunks(total_bytes))


def large_page_chunks(total_bytes: int) -> Iterator[str]:
    """The pieces of a large page, so a handler can stream it without building it whole."""
    head, tail = document(title="Large page", body="\0").split("\0")
    yield head
    size, index = len(head) + len(tail), 0
    while size < total_bytes:
        part = section(index)
        yield part
        size, index = size + len(part), index + 1
    yield tail


def multibyte_paragraph() -> str:
    """The `<p>` that `/multibyte` repeats; its text is these lines joined by spaces."""
    return "<p>" + " ".join([MULTIBYTE_LINE] * MULTIBYTE_LINES_PER_PARAGRAPH) + "</p>\n"


def multibyte_page(total_bytes: int) -> str:
    """`/multibyte`: paragraphs of multi-byte text, at least `total_bytes` of UTF-8."""
    skeleton = document(title="Multi-byte text", body="")
    part = multibyte_paragraph()
    count = -(-(total_bytes - len(skeleton.encode())) // len(part.encode()))
    return document(title="Multi-byte text", body=part * max(count, 1))
