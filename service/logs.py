"""structlog set-up: key-value events, JSON when the log stream is not a terminal.

structlog's own events and the standard-library records of the libraries underneath (aiokafka,
asyncio, aiohttp, Playwright, `warnings`) go through one `logging` handler whose
`structlog.stdlib.ProcessorFormatter` renders them alike: every line has the same format, a
`level` and a `logger` name.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Final, TextIO

import structlog

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.settings import Settings

OWN_LOGGERS: Final = "service"
"""The stdlib logger above every `get_logger(__name__)` of this package: it logs at the set
level, while the libraries' loggers (the root's level) log at WARNING and above (at the set level
when that is higher): their DEBUG and INFO would drown ours."""

HANDLER_NAME: Final = "crawlstream"
"""The name of the handler `configure_logging` installs, so a second call replaces it."""

_FORMING: Final = (
    r"\[Error (?:14|15|16)\] "
    r"(?:GroupLoadInProgressError|GroupCoordinatorNotAvailableError|NotCoordinatorForGroupError)"
)

EXPECTED_WHILE_A_GROUP_FORMS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "aiokafka.consumer.group_coordinator",
        re.compile(rf"Group Coordinator Request failed: {_FORMING}"),
    ),
    (
        "aiokafka.consumer.group_coordinator",
        re.compile(rf"Error sending \w+ to node \S+ \[{_FORMING}\] -- marking coordinator dead"),
    ),
    (
        "aiokafka.consumer.fetcher",
        re.compile(
            r"Failed fetch offsets from \S+: \[Error (?:5|6)\]"
            r" (?:LeaderNotAvailableError|NotLeaderForPartitionError): .*"
        ),
    ),
)
"""(logger, message) of the records aiokafka logs at ERROR while a group's coordinator is not
ready yet: a new group on a new broker (no `__consumer_offsets` yet), a coordinator that moved or
is still loading the group; and while a partition has no leader yet (topics the worker has just
created). aiokafka retries them by itself; any other message of those loggers, a request
timeout or an unknown error included, keeps its level."""

EXPECTED_LEVEL: Final = logging.WARNING
"""The level of a record of `EXPECTED_WHILE_A_GROUP_FORMS`: out of an error pipeline, still seen
when it repeats for long."""


class ExpectedWhileAGroupForms(logging.Filter):
    """Lowers the records of `EXPECTED_WHILE_A_GROUP_FORMS` to `EXPECTED_LEVEL`, and drops them
    when that is under `threshold` (the libraries' level)."""

    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= EXPECTED_LEVEL or not _expected(record):
            return True
        record.levelno = EXPECTED_LEVEL
        record.levelname = logging.getLevelName(EXPECTED_LEVEL)
        return self.threshold <= EXPECTED_LEVEL


LIBRARIES: Final = "aiokafka"
"""The library whose records repeat: each of its clients retries a broker it cannot reach
every 100 ms and logs each attempt (a worker's dozen clients: about 200 lines a second while
the broker is down)."""

REPEAT_WINDOW_S: Final = 10.0
"""A record of `LIBRARIES` whose message (its format string) came within this many seconds
is dropped and counted; the next one after the window says how many (`repeated`)."""


class RepeatsOfALibrary(logging.Filter):
    """Lets one record of each `LIBRARIES` message through per `REPEAT_WINDOW_S`, and gives
    the next one the count of those dropped in between."""

    def __init__(
        self, window_s: float = REPEAT_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._window_s = window_s
        self._clock = clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}
        """(logger, message) -> when one last went through, how many dropped since."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(LIBRARIES):
            return True
        key = (record.name, str(record.msg))
        now = self._clock()
        passed_at, dropped = self._seen.get(key, (None, 0))
        if passed_at is not None and now - passed_at < self._window_s:
            self._seen[key] = (passed_at, dropped + 1)
            return False
        self._seen[key] = (now, 0)
        if dropped:
            record.repeated = dropped
        return True


def _expected(record: logging.LogRecord) -> bool:
    return any(
        record.name == name and pattern.fullmatch(record.getMessage())
        for name, pattern in EXPECTED_WHILE_A_GROUP_FORMS
    )


def configure_logging(settings: Settings, stream: TextIO | None = None) -> None:
    """Send every log line, ours and the libraries', to `stream` (standard error by default)."""
    stream = stream or sys.stderr
    level = getattr(logging, settings.log_level.upper())
    libraries = max(level, logging.WARNING)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(stream)
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(_formatter(settings, stream, shared))
    handler.addFilter(ExpectedWhileAGroupForms(libraries))
    handler.addFilter(RepeatsOfALibrary())
    _install(handler, level, libraries)


def _formatter(settings: Settings, stream: TextIO, shared: list[Any]) -> logging.Formatter:
    as_json = settings.log_format == "json" or (
        settings.log_format == "auto" and not stream.isatty()
    )
    rendering: list[Any] = (
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
        if as_json
        else [structlog.dev.ConsoleRenderer()]
    )
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(allow=("repeated",))],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
    )


def _install(handler: logging.Handler, level: int, libraries: int) -> None:
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(libraries)
    logging.getLogger(OWN_LOGGERS).setLevel(level)
    logging.captureWarnings(capture=True)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name)
    return logger
