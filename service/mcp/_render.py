"""Tool answers as text a model reads: markdown first, then the rest of a document; an answer
longer than a model's context can take is cut, and the cut says how to get the rest. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

TEXT_BUDGET_CHARS: Final = 60_000
"""Characters of text one tool answer holds at most. Agent hosts cap a tool's output (Claude
Code at 25,000 tokens by default); 60,000 characters of markdown is about 15,000 tokens of
prose, leaving room for link-dense pages, which take more tokens per character."""

TEXT_FIELDS: Final = ("markdown", "summary", "html", "rawHtml")
"""Document fields rendered as text after one another, in this order; the rest as JSON."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """The part of a text one answer holds: characters `offset` to `end` of `total`."""

    text: str
    offset: int
    end: int
    total: int

    @property
    def cut(self) -> bool:
        return self.end < self.total

    def note(self, tool: str) -> str:
        """The line telling the agent how to get the rest (empty when nothing was cut)."""
        if not self.cut:
            return ""
        return (
            f"\n\n[Cut at character {self.end} of {self.total}. Call {tool} again with the "
            f"same arguments and offset={self.end} for the rest.]"
        )


def window(text: str, offset: int, budget: int = TEXT_BUDGET_CHARS) -> Window:
    """Characters `offset` to `offset + budget` of `text`, ended at a line break when one is in
    the last fifth (a line of markdown is not split when that costs little)."""
    start = min(max(offset, 0), len(text))
    end = min(start + budget, len(text))
    if end < len(text):
        newline = text.rfind("\n", start + budget * 4 // 5, end)
        end = newline + 1 if newline >= 0 else end
    return Window(text=text[start:end], offset=start, end=end, total=len(text))


def document_text(document: dict[str, Any]) -> str:
    """A Firecrawl document as text: its markdown (then summary, HTML) first, then its other
    fields (metadata, links, screenshot, json, warning) as JSON."""
    parts = [str(document[key]) for key in TEXT_FIELDS if document.get(key)]
    rest = {key: value for key, value in document.items() if key not in TEXT_FIELDS}
    if rest:
        parts.append("```json\n" + json.dumps(rest, indent=1, ensure_ascii=False) + "\n```")
    return "\n\n".join(parts)


def source_of(document: dict[str, Any]) -> str:
    """The URL a document was scraped from (its `metadata.sourceURL`, else its `url`)."""
    metadata = document.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("sourceURL"), str):
        return str(metadata["sourceURL"])
    return str(metadata.get("url", "")) if isinstance(metadata, dict) else ""
