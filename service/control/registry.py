"""The cancelled request_ids a worker remembers: pure, fed by the control reader."""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pydantic import ValidationError

from service.contracts import CONTROL_KINDS, ControlMessage, utc_now

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime, timedelta

MAX_REMEMBERED: Final = 100_000
"""Cancels kept at most (about 200 bytes each); beyond it the oldest-arrived are forgotten."""


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
    skip: str | None = None


def parse_control(key: bytes | None, value: bytes | None) -> ControlAction:
    """The action of a control record; never raises (one bad record must not stop the reader)."""
    if value is None:
        if key is None:
            return ControlAction(skip="a tombstone without a key")
        return ControlAction(forget=key.decode(errors="replace"))
    try:
        message = ControlMessage.model_validate_json(value).root
    except ValidationError as exc:
        return ControlAction(skip=_why_skipped(value, exc))
    cancel = Cancel(request_id=message.request_id, reason=message.reason, at=message.at)
    return ControlAction(cancel=cancel)


def _why_skipped(value: bytes, exc: ValidationError) -> str:
    try:
        kind = json.loads(value).get("type")
    except (ValueError, AttributeError, RecursionError):
        kind = None
    if isinstance(kind, str) and kind not in CONTROL_KINDS:
        return f"unknown control type {kind!r}"
    return f"invalid control message: {exc.error_count()} error(s), first: {exc.errors()[0]['msg']}"


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

    def apply(self, action: ControlAction) -> Cancel | None:
        """Take one control record's action; returns the cancel it applied, if any."""
        if action.forget is not None:
            self._cancels.pop(action.forget, None)
        cancel = action.cancel
        if cancel is None or self._expired(cancel):
            return None
        self._cancels.pop(cancel.request_id, None)
        self._cancels[cancel.request_id] = cancel
        while len(self._cancels) > self._capacity:
            self._cancels.popitem(last=False)
        for listener in self._listeners:
            listener(cancel)
        return cancel

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
        return cancel.at + self._retention <= self._clock()
