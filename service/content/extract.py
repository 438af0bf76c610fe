"""What a request gets from a rendered page: Markdown, text, links and metadata.

`extract` is a pure, synchronous function over one HTML string; each call builds its own
parser, so worker threads can run it side by side (`asyncio.to_thread`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from selectolax.lexbor import LexborHTMLParser

from service.content.guard import MAX_PARSE_WORK, parse_work
from service.content.links import document_base, followable_links, links_of
from service.content.metadata import canonical_of, metadata_of, title_of
from service.content.readable import markdown_of, text_of, visible_content
from service.content.schema_extract import ExtractionInput
from service.content.shaping import NO_SHAPING, Shaping, shaped
from service.content.structured import structured_data
from service.contracts import Format, Links, PageMetadata
from service.errors import PermanentError

if TYPE_CHECKING:
    from collections.abc import Collection

    from pydantic import JsonValue

    from service.content.schema_extract import Extractor
    from service.contracts import StructuredData

_NUL: Final = "\x00"
"""Dropped from the input: the parser drops it from text too, and text extraction uses it."""


class HtmlTooComplexError(PermanentError):
    """The document is nested so deeply that parsing it would take minutes."""

    def __init__(self, work: int) -> None:
        super().__init__(f"HTML nesting too deep to parse (estimated work {work:,})")
        self.work = work

    def __reduce__(self) -> tuple[type[HtmlTooComplexError], tuple[int]]:
        return type(self), (self.work,)  # raised in a content process, re-raised here


@dataclass(frozen=True, slots=True, kw_only=True)
class Extracted:
    """The outputs of one page; a field is None unless its format was asked for."""

    title: str | None = None
    """Always filled when the page has a title."""
    markdown: str | None = None
    text: str | None = None
    html: str | None = None
    """The input, unchanged."""
    links: Links | None = None
    metadata: PageMetadata | None = None
    outlinks: Outlinks | None = None
    """What a deep crawl follows from the page, when asked for."""
    json_data: JsonValue = None
    """What the request's extractor read, when it has one."""
    structured_data: StructuredData | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FollowRules:
    """A deep crawl asks for the links it may follow."""

    respect_nofollow: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Outlinks:
    """Links a deep crawl may follow (absolute, document order, each once) and the page's
    canonical URL."""

    links: tuple[str, ...] = ()
    canonical: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Readable:
    markdown: str | None = None
    text: str | None = None


def extract(
    html: str,
    *,
    base_url: str,
    formats: Collection[Format],
    follow: FollowRules | None = None,
    shaping: Shaping = NO_SHAPING,
    extractor: Extractor | None = None,
) -> Extracted:
    """Parse `html` of the page at `base_url` once and build the outputs `formats` asks for
    (and the links to follow, when `follow` is given; the `json` of `extractor`, when given).

    Links, metadata, structured data and the links to follow come from the whole document;
    `shaping` then narrows what markdown, text and `json` are made of.

    Raises HtmlTooComplexError for pathologically nested documents.
    """
    wanted = frozenset(formats)
    work = parse_work(html)
    if work > MAX_PARSE_WORK:
        raise HtmlTooComplexError(work)
    tree = LexborHTMLParser(html.replace(_NUL, "") if _NUL in html else html)
    resolver = document_base(tree, base_url)
    title = title_of(tree)
    links = None
    if Format.LINKS in wanted:
        links = links_of(tree, page_url=base_url, resolver=resolver)
    metadata = None
    if Format.METADATA in wanted:
        metadata = metadata_of(tree, title=title, resolver=resolver)
    outlinks = None
    if follow is not None:
        outlinks = Outlinks(
            links=followable_links(
                tree, resolver=resolver, respect_nofollow=follow.respect_nofollow
            ),
            canonical=canonical_of(tree, resolver),
        )
    structured = None
    if Format.STRUCTURED_DATA in wanted:
        structured = structured_data(html, base_url=resolver.base)
    if shaping.shapes:
        tree = shaped(tree, shaping)
    json_data = None
    if extractor is not None:
        json_data = extractor.extract(ExtractionInput(tree=tree, base_url=resolver.base))
    readable = _readable(tree, resolver.base, wanted)
    return Extracted(
        title=title,
        markdown=readable.markdown,
        text=readable.text,
        html=html if Format.HTML in wanted else None,
        links=links,
        metadata=metadata,
        outlinks=outlinks,
        json_data=json_data,
        structured_data=structured,
    )


def _readable(tree: LexborHTMLParser, base: str, wanted: frozenset[Format]) -> _Readable:
    """Markdown and text (last: they mutate `tree`); text stands in for too deep Markdown."""
    if Format.MARKDOWN not in wanted and Format.TEXT not in wanted:
        return _Readable()
    content = visible_content(tree)
    if content is None:
        return _Readable(
            markdown="" if Format.MARKDOWN in wanted else None,
            text="" if Format.TEXT in wanted else None,
        )
    markdown = markdown_of(content, base) if Format.MARKDOWN in wanted else None
    text = text_of(content) if Format.TEXT in wanted or markdown is None else None
    if Format.MARKDOWN in wanted and markdown is None:
        markdown = text
    return _Readable(markdown=markdown, text=text if Format.TEXT in wanted else None)
