"""How a page's observation compares with the previous one of its history (pure rules).

`new`: no previous observation, or the page was gone and answers again; `same`: equal
hashes, or gone both times; `changed`: different hashes (with a unified diff of the Markdown
when asked and both Markdowns are kept); `removed`: it answered before and is now gone (404
or 410).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from service.contracts import PageChange

if TYPE_CHECKING:
    from datetime import datetime

GONE_STATUSES: Final = frozenset({404, 410})
"""Answers that say a page that existed is no more."""

MAX_DIFF_CHARS: Final = 262_144
"""Longest diff a result carries; a longer one is cut at a line and says so."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """One look at a tracked page."""

    fetched_at: datetime
    sha256: str | None
    """Of its reading (None: the page was gone)."""
    markdown: str | None = None

    @property
    def gone(self) -> bool:
        return self.sha256 is None


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """A page's newest observation under its tag, and the one before it."""

    latest: Observation
    result_id: str
    """The result that made `latest` (`PageResult.result_id`)."""
    before: Observation | None = None

    def basis(self, result_id: str) -> tuple[Observation | None, bool]:
        """What the result `result_id` compares with, and whether that is `before`: a
        redelivered page (its result made `latest`, then its worker died before the result
        was acknowledged) compares with what its first attempt compared with, so its
        result says what changed since the previous run, not `same`."""
        if result_id == self.result_id:
            return self.before, True
        return self.latest, False


def status_of(previous: Observation | None, current: Observation) -> str:
    if previous is None:
        return "new"
    if current.gone:
        return "same" if previous.gone else "removed"
    if previous.gone:
        return "new"
    return "same" if previous.sha256 == current.sha256 else "changed"


def compare(
    previous: Observation | None, current: Observation, *, previous_markdown: str | None = None
) -> PageChange:
    """The change from `previous` to `current`; a diff when `previous_markdown` (the previous
    observation's Markdown, read only when a diff is asked for) and the current one are known."""
    status = status_of(previous, current)
    diff = None
    if status == "changed" and previous_markdown is not None and current.markdown is not None:
        diff = unified_diff(previous_markdown, current.markdown)
    return PageChange.model_validate(
        {
            "status": status,
            "previous_fetched_at": previous.fetched_at if previous is not None else None,
            "diff": diff,
        }
    )


def unified_diff(old: str, new: str) -> str:
    """A unified diff of two Markdowns, old first, cut at `MAX_DIFF_CHARS`."""
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), "previous", "current", lineterm=""
    )
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > MAX_DIFF_CHARS:
            kept.append(f"\\ diff cut at {MAX_DIFF_CHARS} characters")
            break
        kept.append(line)
    return "\n".join(kept)
