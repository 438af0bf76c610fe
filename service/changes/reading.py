"""What a tracked page says, with the noise left out: the content a change is judged on.

A page is read as the request asked to read it (`only_main_content`, `include_tags`,
`exclude_tags`), without what changes on every load and means nothing: scripts, styles,
templates, hidden inputs, `<time>` elements, hidden elements, every attribute (a nonce, a
cache-busting URL) and whitespace, nor the elements `change_tracking.ignore` names. Its
`sha256` is taken over the visible text so read, whitespace collapsed; its Markdown is what a
diff shows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from selectolax.lexbor import LexborHTMLParser

from service.content.extract import HtmlTooComplexError
from service.content.guard import MAX_PARSE_WORK, parse_work
from service.content.readable import markdown_of, visible_content
from service.content.shaping import Shaping, shaped

if TYPE_CHECKING:
    from service.contracts import CrawlOptions

NOISE_SELECTOR: Final = "script, style, noscript, template, time, input[type=hidden i]"
"""Elements whose content never counts as change."""

MAX_MARKDOWN_CHARS: Final = 262_144
"""Longest Markdown kept in a page's history for a later diff (a longer page is still
compared by its hash; its next change comes without a diff)."""

_NUL: Final = "\x00"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """A page's content as change tracking compares it."""

    sha256: str
    """Of the visible text, whitespace collapsed."""
    markdown: str | None
    """What a diff shows (None: longer than `MAX_MARKDOWN_CHARS`)."""


def shaping_of(options: CrawlOptions, ignore: tuple[str, ...]) -> Shaping:
    """The request's own shaping, plus the noise and the `ignore` selectors left out."""
    return Shaping(
        only_main_content=options.only_main_content,
        include=options.include_tags,
        exclude=(*options.exclude_tags, NOISE_SELECTOR, *ignore),
    )


def read_html(html: str, *, base_url: str, shaping: Shaping) -> Reading:
    """The reading of a document (synchronous: run it in a worker thread).

    Raises HtmlTooComplexError for pathologically nested documents."""
    work = parse_work(html)
    if work > MAX_PARSE_WORK:
        raise HtmlTooComplexError(work)
    tree = shaped(LexborHTMLParser(html.replace(_NUL, "")), shaping)
    content = visible_content(tree)
    if content is None:
        return read_text("")
    text = content.text(separator=" ")
    markdown = markdown_of(content, base_url)
    return Reading(sha256=_digest(text), markdown=_kept(markdown if markdown is not None else text))


def read_text(text: str) -> Reading:
    """The reading of content that has no document (a PDF's text, a cut-short page)."""
    return Reading(sha256=_digest(text), markdown=_kept(text))


def _digest(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def _kept(markdown: str) -> str | None:
    return markdown if len(markdown) <= MAX_MARKDOWN_CHARS else None
