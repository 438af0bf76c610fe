"""A check's summary, folded from its page results (Firecrawl's `totalPages`, `same`,
`changed`, `new`, `removed`, `error`). Pure: the gateway and the webhook dispatcher feed it
the results of a check's requests."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Iterable

    from service.contracts import PageResult

PageStatus = Literal["same", "new", "changed", "removed", "error"]


def page_status(result: PageResult) -> PageStatus:
    """A page's status in a check: its change status, or `error` when it was not compared
    (it failed, or tracking could not read it)."""
    if result.change_tracking is None:
        return "error"
    return result.change_tracking.status


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    same: int = 0
    changed: int = 0
    new: int = 0
    removed: int = 0
    error: int = 0

    @property
    def total(self) -> int:
        return self.same + self.changed + self.new + self.removed + self.error

    def counted(self, status: PageStatus) -> Summary:
        return replace(self, **{status: getattr(self, status) + 1})

    def wire(self) -> dict[str, Any]:
        """Firecrawl's `summary` object."""
        return {
            "totalPages": self.total,
            "same": self.same,
            "changed": self.changed,
            "new": self.new,
            "removed": self.removed,
            "error": self.error,
        }


def summarise(results: Iterable[PageResult]) -> Summary:
    """The summary of a check's results, each `result_id` counted once (a redelivered page
    is not two pages)."""
    summary, seen = Summary(), set()
    for result in results:
        if result.result_id in seen:
            continue
        seen.add(result.result_id)
        summary = summary.counted(page_status(result))
    return summary
