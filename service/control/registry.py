"""The cancelled request_ids a worker remembers: pure, fed by the control reader."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from pydantic import ValidationError

from service.contracts import ControlMessage, utc_now

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime, timedelta

    from pydantic_core import ErrorDetails

MAX_REMEMBERED: Final = 100_000
"""Cancels kept at most (about 200 bytes each); beyond it the oldest-arrived are forgotten."""

MAX_CONTROL_BYTES: Final = 16_384
"""Largest control record parsed. A cancel is at most ~3.3 KB (its 500-character reason
written as `\\uXXXX` escapes); a larger record is skipped unread, so a huge one costs no parse."""

MAX_DETAIL_CHARS: Final = 300
"""Longest description of a skipped record that is logged (it quotes untrusted input)."""


class SkipReason(StrEnum):
    """Why a control record was skipped: the `reason` label of
    `crawl_control_records_skipped_total`, a fixed set."""

    TOO_LARGE = "too_large"
    """Larger than `MAX_CONTROL_BYTES`."""
    NOT_JSON = "not_json"
    """Not UTF-8 JSON, or nested too deeply to parse."""
    UNKNOWN_TYPE = "unknown_type"
    """A `type` this version does not know (a newer kind): not an error."""
    INVALID = "invalid"
    """JSON that breaks the contract: a time without a time zone or out of range, a bad
    request_id, a missing or unknown field."""
    NO_KEY = "no_key"
    """A tombstone without a key: nothing to withdraw."""
    FAILED = "failed"
    """Applying it raised (a bug): the reader logged the traceback and went on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Skip:
    """A control record that does nothing, and why."""

    reason: SkipReason
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    """A request_id was cancelled at `at`, for `reason`."""

    request_id: str
    reason: str | None
    at: datetime

    @property
    def detail(self) -> str:
        """What the terminal event says."""
        return f"cancelled: {self.reason}" if self.reason else "cancelled"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlAction:
    """What one control record means: a cancel, a tombstone (`forget`), or nothing to do
    (`skip`: a kind this version does not know, or a malformed record, with why)."""

    cancel: Cancel | None = None
    forget: str | None = None
    skip: Skip | None = None


class Applied(StrEnum):
    """What `CancelRegistry.apply` did with an action."""

    CANCELLED = "cancelled"
    """A cancel within retention: remembered, and its listeners told."""
    EXPIRED = "expired"
    """A cancel issued longer ago than the retention: ignored."""
    FORGOTTEN = "forgotten"
    """A tombstone: the key's cancel is withdrawn."""
    SKIPPED = "skipped"
    """A record that does nothing (see `ControlAction.skip`)."""


def parse_control(key: bytes | None, value: bytes | None) -> ControlAction:
    """The action of a control record; never raises (one bad record must not stop the reader)."""
    if value is None:
        if key is None:
            return _skip(SkipReason.NO_KEY, "a tombstone without a key")
        return ControlAction(forget=key.decode(errors="replace"))
    if len(value) > MAX_CONTROL_BYTES:
        return _skip(SkipReason.TOO_LARGE, f"{len(value)} bytes, more than {MAX_CONTROL_BYTES}")
    try:
        message = ControlMessage.model_validate_json(value).root
    except ValidationError as exc:
        return _skip(*_why_skipped(exc.errors()[0]))
    cancel = Cancel(request_id=message.request_id, reason=message.reason, at=message.at)
    return ControlAction(cancel=cancel)


def _skip(reason: SkipReason, detail: str) -> ControlAction:
    return ControlAction(skip=Skip(reason=reason, detail=detail[:MAX_DETAIL_CHARS]))


def _why_skipped(error: ErrorDetails) -> tuple[SkipReason, str]:
    """The reason and description of a record that failed validation, from its first error
    (read from the error, so a malformed record is not parsed a second time)."""
    if error["type"] == "json_invalid":
        return SkipReason.NOT_JSON, error["msg"]
    if error["type"] == "union_tag_invalid":
        kind = (error.get("ctx") or {}).get("tag")
        return SkipReason.UNKNOWN_TYPE, f"unknown control type {kind!r}"
    where = ".".join(str(part) for part in error["loc"][1:]) or "message"
    return SkipReason.INVALID, f"invalid control message: {where}: {error['msg']}"


class CancelRegistry:
    """request_id -> its cancel, for `retention` after the cancel was issued.

    Listeners hear of every cancel applied, so a running request stops at once; `lookup`
    answers for requests that start later (or are delivered again).
    """

    def __init__(
        self,
        retention: timedelta,
        *,
        capacity: int = MAX_REMEMBERED,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._retention = retention
        self._capacity = capacity
        self._clock = clock
        self._cancels: OrderedDict[str, Cancel] = OrderedDict()
        self._listeners: list[Callable[[Cancel], None]] = []

    def __len__(self) -> int:
        return len(self._cancels)

    def listen(self, listener: Callable[[Cancel], None]) -> None:
        self._listeners.append(listener)

    def apply(self, action: ControlAction) -> Applied:
        """Take one control record's action; says what it did."""
        if action.forget is not None:
            self._cancels.pop(action.forget, None)
            return Applied.FORGOTTEN
        cancel = action.cancel
        if cancel is None:
            return Applied.SKIPPED
        if self._expired(cancel):
            return Applied.EXPIRED
        self._cancels.pop(cancel.request_id, None)
        self._cancels[cancel.request_id] = cancel
        while len(self._cancels) > self._capacity:
            self._cancels.popitem(last=False)
        for listener in self._listeners:
            listener(cancel)
        return Applied.CANCELLED

    def lookup(self, request_id: str) -> Cancel | None:
        """The cancel of `request_id` if it is remembered and within retention."""
        cancel = self._cancels.get(request_id)
        if cancel is not None and self._expired(cancel):
            del self._cancels[request_id]
            return None
        return cancel

    def prune(self) -> int:
        """Forget every cancel past retention; returns how many."""
        expired = [rid for rid, cancel in self._cancels.items() if self._expired(cancel)]
        for request_id in expired:
            del self._cancels[request_id]
        return len(expired)

    def _expired(self, cancel: Cancel) -> bool:
        """Issued `retention` ago or longer. A difference, not `at + retention`: two aware
        datetimes subtract without overflow whatever their years."""
        return self._clock() - cancel.at >= self._retention
