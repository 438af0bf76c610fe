"""The runs a worker has in progress, by request_id, so a cancel reaches them at once."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterator

    from service.control.registry import Cancel


class Stoppable(Protocol):
    """A run that can be told to stop because its request was cancelled."""

    def cancel(self, cancel: Cancel) -> None: ...


class ActiveRuns:
    """request_id -> the runs of it in progress here (two submissions may share an id)."""

    def __init__(self) -> None:
        self._runs: dict[str, set[Stoppable]] = {}

    def __len__(self) -> int:
        return sum(len(runs) for runs in self._runs.values())

    @contextlib.contextmanager
    def running(self, request_id: str, run: Stoppable) -> Iterator[None]:
        """Register `run` while the block runs."""
        self._runs.setdefault(request_id, set()).add(run)
        try:
            yield
        finally:
            runs = self._runs.get(request_id, set())
            runs.discard(run)
            if not runs:
                self._runs.pop(request_id, None)

    def cancel(self, cancel: Cancel) -> int:
        """Tell every run of the cancelled request to stop; returns how many there were."""
        runs = list(self._runs.get(cancel.request_id, ()))
        for run in runs:
            run.cancel(cancel)
        return len(runs)
