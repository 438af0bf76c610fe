"""HTML building blocks for the test site: a document skeleton and seeded filler text."""

from __future__ import annotations

import html
import json
import random
from functools import lru_cache

WORDS = (
    "crawl", "stream", "kafka", "partition", "offset", "browser", "render", "page", "memory",
    "headroom", "backpressure", "consumer", "producer", "topic", "message", "schema", "worker",
    "chromium", "request", "response", "header", "redirect", "canonical", "robots", "policy",
    "address", "network", "socket", "timeout", "deadline", "retry", "budget", "latency",
    "throughput", "extract", "markdown", "title", "link", "anchor", "document", "script",
    "style", "image", "frame", "layout", "paint", "event", "queue", "batch", "commit", "ledger",
    "metric", "histogram", "counter", "gauge", "sample", "snapshot", "governor", "gate", "pause",
)  # fmt: skip
"""Vocabulary of the filler text; crawler-flavoured so extracted text reads plausibly."""

SENTENCE_WORDS = (6, 16)
"""Inclusive bounds on the number of words in one sentence."""

PARAGRAPH_SENTENCES = (3, 7)
"""Inclusive bounds on the number of sentences in one paragraph."""

PARAGRAPHS_PER_SECTION = 4
"""Paragraphs between two `<h2>` headings in filler text."""

BLOCK_BYTES = 16_384
"""Size of the reusable filler block that large and huge pages repeat."""

BLOCK_SEED = 20_240
"""Seed of the reusable filler block."""


def escape(text: str) -> str:
    """Escape text for an HTML element body or a double-quoted attribute."""
    return html.escape(text, quote=True)


def script_literal(value: str) -> str:
    """A JavaScript string literal that cannot close the surrounding `<script>` element."""
    return json.dumps(value).replace("<", "\\u003c")


def document(*, title: str, body: str, head: str = "") -> str:
    """A complete HTML5 document in English."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n{head}</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def sentence(rng: random.Random) -> str:
    """One capitalised sentence of vocabulary words."""
    words = rng.choices(WORDS, k=rng.randint(*SENTENCE_WORDS))
    return " ".join(words).capitalize() + "."


def paragraph(rng: random.Random) -> str:
    """One `<p>` element of a few sentences."""
    count = rng.randint(*PARAGRAPH_SENTENCES)
    return "<p>" + " ".join(sentence(rng) for _ in range(count)) + "</p>\n"


def filler(rng: random.Random, budget: int) -> str:
    """Headings and paragraphs adding up to at least `budget` characters (ASCII only)."""
    parts: list[str] = []
    size = 0
    while size < budget:
        if len(parts) % (PARAGRAPHS_PER_SECTION + 1) == 0:
            part = f"<h2>{sentence(rng)}</h2>\n"
        else:
            part = paragraph(rng)
        parts.append(part)
        size += len(part)
    return "".join(parts)


@lru_cache(maxsize=1)
def block() -> str:
    """A fixed filler block, reused so multi-megabyte pages cost no extra generation."""
    return filler(random.Random(BLOCK_SEED), BLOCK_BYTES)


def section(index: int) -> str:
    """A numbered `<section>` around the fixed filler block."""
    return f'<section id="s{index}">\n<h2>Section {index}</h2>\n{block()}</section>\n'
