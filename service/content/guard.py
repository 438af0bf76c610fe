"""A cheap estimate of how hard an HTML document is for the tree builder, taken before parsing.

The HTML tree builder scans the stack of open elements for many start tags (for a `p` in
button scope, for example), so its work grows with the sum of the nesting depth at each start
tag: linear for real pages, quadratic for a document of 100,000 unclosed `<div>` tags (31 s in
lexbor). Browsers bound the depth their parser builds; a DOM built by script is not bounded.
This scan estimates that sum in linear time so such a document is refused instead of
occupying a worker thread for minutes.
"""

from __future__ import annotations

import re
from typing import Final

MAX_PARSE_WORK: Final = 200_000_000
"""Largest accepted sum of nesting depths at each start tag (lexbor needs about 1 s for it)."""

_TAG: Final = re.compile(r"<(/?)([A-Za-z][^\s/>]*)|<!--")
"""A start or end tag name, or the start of a comment."""

_COMMENT_END: Final = "-->"

_RAW_TEXT: Final = frozenset(
    {"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"}
)
"""Elements whose content is text up to their end tag, never markup."""

_RAW_TEXT_END: Final = {name: re.compile(f"</{name}", re.IGNORECASE) for name in _RAW_TEXT}

_PLAINTEXT: Final = "plaintext"
"""Everything after this start tag is text."""

_NOT_NESTING: Final = frozenset(
    {
        # void elements: never have content
        "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "source", "track", "wbr", "keygen", "param",
        # elements whose end tag is implied by the next sibling
        "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "tbody", "thead",
        "tfoot", "rb", "rt", "rp", "rtc", "colgroup", "caption", "html", "head", "body",
    }
)  # fmt: skip
"""Start tags that do not deepen the tree of a sane document."""


def parse_work(html: str) -> int:
    """An upper estimate of the tree builder's work for `html` (sum of depths at start tags).

    Exact enough to tell a sane page from a pathological one; stops counting past the limit.
    """
    tags = html.count("<")
    bound = tags * (tags + 1) // 2
    if bound <= MAX_PARSE_WORK:
        return bound
    return _scan(html)


def _scan(html: str) -> int:
    pos = depth = work = 0
    while work <= MAX_PARSE_WORK and (match := _TAG.search(html, pos)) is not None:
        pos = match.end()
        name = match.group(2)
        if name is None:
            pos = _after(html, html.find(_COMMENT_END, pos), len(_COMMENT_END))
            continue
        name = name.lower()
        if match.group(1):
            if name not in _NOT_NESTING:
                depth = max(depth - 1, 0)
            continue
        work += depth
        if name not in _NOT_NESTING:
            depth += 1
            pos = _after_raw_text(html, name, pos)
    return work


def _after_raw_text(html: str, name: str, pos: int) -> int:
    if name == _PLAINTEXT:
        return len(html)
    end = _RAW_TEXT_END.get(name)
    if end is None:
        return pos
    match = end.search(html, pos)
    return len(html) if match is None else match.start()


def _after(html: str, found: int, length: int) -> int:
    return len(html) if found < 0 else found + length
