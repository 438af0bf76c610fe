"""HTML to Markdown with html-to-markdown (Rust): linear in the size of the document."""

from __future__ import annotations

from typing import Final

import html_to_markdown as h2m

_OPTIONS: Final = h2m.ConversionOptions(
    heading_style=h2m.HeadingStyle.ATX,
    newline_style=h2m.NewlineStyle.BACKSLASH,  # trailing spaces would not survive the tidy-up
    bullets="*+-",
    escape_asterisks=True,
    escape_underscores=True,
    compact_tables=True,
    highlight_style=h2m.HighlightStyle.NONE,
    expand_abbreviations=False,
    include_blockquote_citations=False,
    extract_metadata=False,
    hidden_content=h2m.HiddenContent.DROP,
    preprocessing=h2m.PreprocessingOptions(enabled=False),
)
"""Markdown like markdownify wrote it. The caller has already dropped invisible elements and
made URLs absolute; preprocessing is off because it would drop navigation and forms, which the
text output keeps. Metadata comes from the page's own parser, not from here."""

_TOO_DEEP: Final = h2m.WarningKind.DEPTH_LIMIT_EXCEEDED
"""Past its depth limit (1,024 elements) the converter leaves the deeper content out."""


def markdown_from_html(html: str) -> str | None:
    """Markdown with ATX headings; None when the converter cannot render all of the HTML.

    That is the case when it is nested deeper than the converter's limit (the content below
    would be missing) or when the converter rejects it; the caller then uses the text.
    """
    try:
        result = h2m.convert(html, _OPTIONS)
    except h2m.ConversionError:
        return None
    if any(warning.kind == _TOO_DEEP for warning in result.warnings):
        return None
    return _without_blank_runs(result.content or "")


def _without_blank_runs(markdown: str) -> str:
    lines: list[str] = []
    for line in markdown.splitlines():
        stripped = line.rstrip()
        if stripped or (lines and lines[-1]):
            lines.append(stripped)
    return "\n".join(lines).strip("\n")
