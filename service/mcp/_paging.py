"""The `cursor` of the job status tools: the gateway's cursor of a page of `data` and how many
of that page's documents earlier answers held (a page can be larger than one answer). Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from service.mcp._errors import ArgumentError
from service.mcp._render import TEXT_BUDGET_CHARS, document_text, source_of, window

SEPARATOR: Final = "~"
"""Between the gateway's cursor (URL-safe base64, never this character) and the skip count."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobCursor:
    """Where the next answer starts: the gateway page (its cursor, None for the job's first)
    and the documents of it already given (`skip`)."""

    page: str | None = None
    skip: int = 0

    def encode(self) -> str:
        return f"{self.page or ''}{SEPARATOR}{self.skip}"

    @classmethod
    def parse(cls, text: str | None) -> JobCursor:
        if not text:
            return cls()
        page, sep, skip = text.rpartition(SEPARATOR)
        if not sep or not skip.isdigit():
            raise ArgumentError("cursor: not a cursor this tool returned")
        return cls(page=page or None, skip=int(skip))


def token_of(next_url: object) -> str | None:
    """The gateway's cursor in a status answer's `next` URL (None when there is no next)."""
    if not isinstance(next_url, str) or not next_url:
        return None
    values = parse_qs(urlsplit(next_url).query).get("cursor")
    return values[0] if values else None


@dataclass(slots=True, kw_only=True)
class Fitted:
    """The documents one answer holds: their text, their structured copies, how many."""

    parts: list[str] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    used: int = 0

    @property
    def taken(self) -> int:
        return len(self.documents)


def fit(documents: list[dict[str, Any]], budget: int = TEXT_BUDGET_CHARS) -> Fitted:
    """As many whole documents as the budget holds (at least one: a document longer than the
    budget alone is cut, and its text says how to read the rest with `firecrawl_scrape`)."""
    fitted = Fitted()
    for document in documents:
        text = f"## {source_of(document)}\n\n{document_text(document)}"
        if fitted.taken and fitted.used + len(text) > budget:
            break
        if len(text) > budget:
            cut = window(text, 0, budget)
            note = (
                f"\n\n[This document is cut at character {cut.end} of {cut.total}: "
                f"firecrawl_scrape its URL with offset={cut.end} for the rest.]"
            )
            fitted.parts.append(cut.text + note)
            fitted.documents.append(_cut_copy(document, cut.end, cut.total))
            fitted.used += len(cut.text)
            break
        fitted.parts.append(text)
        fitted.documents.append(document)
        fitted.used += len(text)
    return fitted


def _cut_copy(document: dict[str, Any], end: int, total: int) -> dict[str, Any]:
    """The structured copy of a document too long for one answer: its metadata and a note."""
    return {"metadata": document.get("metadata"), "cut": {"end": end, "total": total}}
