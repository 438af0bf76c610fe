"""Takes control records one by one into the registry: the reader's error boundary, its
counts and its logs. Pure (no I/O): the reader feeds it what it polls."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Final, Protocol

from service.control.registry import Applied, Skip, SkipReason, parse_control
from service.logs import get_logger

if TYPE_CHECKING:
    from prometheus_client import Counter as MetricCounter

    from service.control.registry import CancelRegistry, ControlAction

log = get_logger(__name__)

MAX_SKIP_WARNINGS_AT_START: Final = 20
"""Skipped records logged one warning each while the topic is read at start; the others are
logged at debug and counted in the start-up summary (a topic full of bad records must not
flood the log, as 50,000 cancels logged one info line each once made 26.6 MB of it)."""


class ControlRecord(Protocol):
    """What is read of one record of the control topic (aiokafka's `ConsumerRecord`)."""

    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...


class ControlRecords:
    """Parses and applies each record; a record that cannot be parsed or applied, for any
    reason, is skipped: counted in `skipped` by reason, logged once, never raised.

    Until `started()`, each cancel is logged at debug only and counted for the one summary
    line; after it too, a cancel that stops a run is said by the worker (`request.cancelling`).
    """

    def __init__(self, registry: CancelRegistry, skipped: MetricCounter) -> None:
        self._registry = registry
        self._skipped = skipped
        for reason in SkipReason:  # every reason exported from the start, at 0
            self._skipped.labels(reason)
        self._outcomes: Counter[Applied] = Counter()
        self._reasons: Counter[SkipReason] = Counter()
        self._starting = True

    def take(self, record: ControlRecord) -> Applied:
        """Apply one record; says what became of it."""
        try:
            action = parse_control(record.key, record.value)
            if action.skip is not None:
                return self._skip(record, action.skip)
            outcome = self._registry.apply(action)
        except Exception as exc:  # the record's error boundary: traceback, count, go on
            log.exception("control.apply_failed", partition=record.partition, offset=record.offset)
            return self._skip(record, Skip(reason=SkipReason.FAILED, detail=repr(exc)), logged=True)
        self._outcomes[outcome] += 1
        _log_cancel(action, outcome)
        return outcome

    def started(self) -> None:
        """The topic was read to its end as of start: one info line with the counts of that
        read (`control.ready`). Skipped records are warned of one by one from now on."""
        self._starting = False
        log.info(
            "control.ready",
            cancels=len(self._registry),
            applied=self._outcomes[Applied.CANCELLED],
            expired=self._outcomes[Applied.EXPIRED],
            forgotten=self._outcomes[Applied.FORGOTTEN],
            skipped=self._outcomes[Applied.SKIPPED],
            skipped_by_reason={str(reason): n for reason, n in sorted(self._reasons.items())},
        )

    def _skip(self, record: ControlRecord, skip: Skip, *, logged: bool = False) -> Applied:
        """Count a skipped record; log it at warning (at debug beyond the start-up quota)."""
        self._skipped.labels(skip.reason).inc()
        self._outcomes[Applied.SKIPPED] += 1
        self._reasons[skip.reason] += 1
        if not logged:
            quiet = self._starting and self._outcomes[Applied.SKIPPED] > MAX_SKIP_WARNINGS_AT_START
            (log.debug if quiet else log.warning)(
                "control.skipped",
                reason=str(skip.reason),
                detail=skip.detail,
                partition=record.partition,
                offset=record.offset,
            )
        return Applied.SKIPPED


def _log_cancel(action: ControlAction, outcome: Applied) -> None:
    """Each cancel at debug, with what became of it."""
    if action.cancel is not None:
        log.debug(
            "control.cancel",
            request_id=action.cancel.request_id,
            reason=action.cancel.reason,
            outcome=str(outcome),
        )
