"""The `<meta http-equiv="refresh" content="5; url=/next">` of a page, read from its HTML.

Chromium navigates by itself when the delay is over; the fetch only needs to know whether to
wait for that navigation. The HTML is untrusted and may be megabytes long, so it is never
parsed here: one linear search finds the first refresh declaration, and only the tag around it
(a bounded slice) is read. The content attribute follows the HTML standard's "shared
declarative refresh steps".
"""

from __future__ import annotations

import html
import itertools
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urljoin

MAX_TAG_CHARS: Final = 4096
"""Longest stretch read on either side of the declaration to find its tag's ends."""

MAX_CANDIDATES: Final = 8
"""Mentions of `http-equiv=refresh` looked at (text or scripts may mention it before a tag)."""

_DECLARATION: Final = re.compile(r"""http-equiv\s*=\s*["']?\s*refresh\b""", re.IGNORECASE)
_CONTENT: Final = re.compile(
    r"""\bcontent\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE
)
_DELAY: Final = re.compile(r"\s*(\d*)(\.[\d.]*)?")
_URL_PREFIX: Final = re.compile(r"url\s*=\s*", re.IGNORECASE)
_WHITESPACE: Final = " \t\n\f\r"


@dataclass(frozen=True, slots=True, kw_only=True)
class Refresh:
    """A declared refresh: after `delay_s` the browser loads `url` (the page itself if none)."""

    delay_s: float
    url: str


def meta_refresh(document: str, page_url: str) -> Refresh | None:
    """The page's first refresh declaration, with its URL made absolute against `page_url`."""
    for found in itertools.islice(_DECLARATION.finditer(document), MAX_CANDIDATES):
        start = document.rfind("<", max(0, found.start() - MAX_TAG_CHARS), found.start())
        end = document.find(">", found.end(), found.end() + MAX_TAG_CHARS)
        if start >= 0 and end >= 0 and document[start : start + 5].lower() == "<meta":
            content = _CONTENT.search(document, start, end)
            if content is None:
                return None
            value = next(group for group in content.groups() if group is not None)
            return parse_refresh(html.unescape(value), page_url)
    return None


def parse_refresh(content: str, page_url: str) -> Refresh | None:
    """The refresh a `content` value declares; None when the value is not a valid one."""
    match = _DELAY.match(content)
    if match is None or (not match.group(1) and not match.group(2)):
        return None
    delay_s = float(match.group(1) or 0)
    rest = content[match.end() :]
    if rest and rest[0] not in f";,{_WHITESPACE}":
        return None
    rest = rest.lstrip(_WHITESPACE)
    rest = rest.removeprefix(";") if rest.startswith(";") else rest.removeprefix(",")
    rest = rest.lstrip(_WHITESPACE)
    prefix = _URL_PREFIX.match(rest)
    if prefix is not None:
        rest = rest[prefix.end() :]
    if rest[:1] in {'"', "'"}:
        quote, rest = rest[0], rest[1:]
        rest = rest.partition(quote)[0]
    target = rest.strip(_WHITESPACE)
    try:
        url = urljoin(page_url, target) if target else page_url
    except ValueError:  # e.g. an unclosed IPv6 bracket: not a URL the browser would load
        return None
    return Refresh(delay_s=delay_s, url=url)
