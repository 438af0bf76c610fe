"""Why a run stops before its pages are done: a cancel, or the request's deadline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from service.contracts import ErrorCode, EventType

if TYPE_CHECKING:
    from service.control import Cancel


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """The code of the results of pages that did not finish, and the run's terminal event."""

    code: ErrorCode
    terminal: EventType
    detail: str

    @classmethod
    def cancelled(cls, cancel: Cancel) -> Stop:
        return cls(code=ErrorCode.CANCELLED, terminal=EventType.CANCELLED, detail=cancel.detail)

    @classmethod
    def deadline(cls, budget_s: float) -> Stop:
        detail = f"deadline: the request's {budget_s:g} s budget passed"
        return cls(code=ErrorCode.DEADLINE, terminal=EventType.EXPIRED, detail=detail)
