"""The libraries' stdlib records come out as our JSON lines; a group forming is not an error."""

from __future__ import annotations

import json
import logging
import tempfile
import warnings
from typing import TYPE_CHECKING, Any

import pytest
import structlog
from aiokafka.errors import (
    GroupCoordinatorNotAvailableError,
    NotLeaderForPartitionError,
    RequestTimedOutError,
)
from aiokafka.structs import TopicPartition

from service.cli.demo import logs_to_file
from service.logs import REPEAT_WINDOW_S, RepeatsOfALibrary, configure_logging, get_logger
from service.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

COORDINATOR = "aiokafka.consumer.group_coordinator"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Each test configures logging its own way; the next test finds it as it was."""
    root = logging.getLogger()
    handlers, levels = list(root.handlers), (root.level, logging.getLogger("service").level)
    yield
    for handler in root.handlers:
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(levels[0])
    logging.getLogger("service").setLevel(levels[1])
    logging.captureWarnings(capture=False)
    structlog.reset_defaults()


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """Every line of standard error as JSON (json.loads fails the test on any other line)."""
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


def _configure(**settings: Any) -> None:
    configure_logging(Settings(log_format="json", **settings))


def test_coordinator_not_available_at_start_is_a_json_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """aiokafka's "Group Coordinator Request failed" while a new group forms is one JSON line of
    its logger, below error level."""
    _configure()
    error = GroupCoordinatorNotAvailableError()
    logging.getLogger(COORDINATOR).error("Group Coordinator Request failed: %s", error)
    [line] = _lines(capsys)
    assert line["event"] == (
        "Group Coordinator Request failed: [Error 15] GroupCoordinatorNotAvailableError"
    )
    assert line["logger"] == COORDINATOR
    assert line["level"] == "warning"
    assert "timestamp" in line


def test_a_partition_without_a_leader_yet_is_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """The offset lookup on a topic the worker has just created fails with NotLeaderForPartition
    until the partition has a leader (aiokafka retries it): a warning, not an error."""
    _configure()
    error = NotLeaderForPartitionError(TopicPartition("crawl.control", 9))
    logging.getLogger("aiokafka.consumer.fetcher").error(
        "Failed fetch offsets from %s: %s", 1, error
    )
    [line] = _lines(capsys)
    assert line["event"].startswith("Failed fetch offsets from 1: [Error 6] NotLeaderForPartition")
    assert line["level"] == "warning"


def test_a_genuine_library_error_stays_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Another coordinator failure (a request that timed out) keeps its error level, in JSON."""
    _configure()
    coordinator = logging.getLogger(COORDINATOR)
    coordinator.error("Group Coordinator Request failed: %s", RequestTimedOutError())
    coordinator.error("Heartbeat session expired - marking coordinator dead")
    lines = _lines(capsys)
    assert [(line["logger"], line["level"]) for line in lines] == [(COORDINATOR, "error")] * 2


def test_library_records_below_warning_are_dropped_and_ours_kept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """At level info our own info events are written, a library's info record is not."""
    _configure(log_level="info")
    logging.getLogger("aiokafka.consumer.group_coordinator").info("Discovered coordinator 1")
    get_logger("service.test_logs").info("worker.started", worker="w1")
    [line] = _lines(capsys)
    assert (line["event"], line["logger"], line["level"]) == (
        "worker.started",
        "service.test_logs",
        "info",
    )
    assert line["worker"] == "w1"


def test_the_level_setting_drops_a_lowered_record(capsys: pytest.CaptureFixture[str]) -> None:
    """At level error the expected coordinator record, now a warning, is not written at all."""
    _configure(log_level="error")
    error = GroupCoordinatorNotAvailableError()
    logging.getLogger(COORDINATOR).error("Group Coordinator Request failed: %s", error)
    logging.getLogger("asyncio").error("Task exception was never retrieved")
    [line] = _lines(capsys)
    assert (line["logger"], line["level"]) == ("asyncio", "error")


def test_exceptions_and_warnings_are_json_too(capsys: pytest.CaptureFixture[str]) -> None:
    """A library's traceback is a field of its JSON line; a Python warning is a JSON line."""
    _configure()
    error = RequestTimedOutError()
    logging.getLogger("aiohttp.server").error("Error handling request", exc_info=error)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("old call", DeprecationWarning, stacklevel=1)
    failed, warned = _lines(capsys)
    assert failed["level"] == "error"
    assert "RequestTimedOutError" in failed["exception"]
    assert (warned["logger"], warned["level"]) == ("py.warnings", "warning")
    assert "old call" in warned["event"]


def test_a_second_configuration_replaces_the_first(capsys: pytest.CaptureFixture[str]) -> None:
    """Configuring twice does not write each line twice."""
    _configure()
    _configure()
    logging.getLogger("aiokafka").warning("once")
    assert [line["event"] for line in _lines(capsys)] == ["once"]


def test_the_demo_logs_to_its_file_and_gives_standard_error_back(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """While the demo runs, our events and the libraries' records go to its file, none to the
    terminal; afterwards standard error has them again."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with logs_to_file(Settings()) as path:
        get_logger("service.cli.demo").info("demo.started")
        logging.getLogger("aiokafka.producer.sender").warning("retrying")
    get_logger("service.cli.demo").info("demo.stopped")
    assert [json.loads(line)["event"] for line in path.read_text().splitlines()] == [
        "demo.started",
        "retrying",
    ]
    assert [line["event"] for line in _lines(capsys)] == ["demo.stopped"]
    assert path.parent == tmp_path


def test_a_library_message_repeated_within_the_window_is_one_line_then_a_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """aiokafka logs each retry of a broker it cannot reach (a worker's clients: ~200 lines a
    second while the broker is down): one line per message and window, the next one with the
    count of those dropped; our own lines are never dropped."""
    _configure()
    now = [100.0]
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "crawlstream")
    repeats = next(f for f in handler.filters if isinstance(f, RepeatsOfALibrary))
    repeats._clock = lambda: now[0]  # noqa: SLF001 - the window without waiting it out
    client = logging.getLogger("aiokafka.client")
    ours = get_logger("service.worker")
    for attempt in range(200):
        client.error("Unable connect to node with id %s: %s", 1, f"refused {attempt}")
        client.error("Unable to update metadata from %s", [1])
        if attempt % 100 == 0:
            ours.warning("kafka.unreachable", attempt=attempt)
        now[0] += 0.01
    now[0] += REPEAT_WINDOW_S
    client.error("Unable connect to node with id %s: %s", 1, "refused again")
    lines = _lines(capsys)
    assert [(line["event"][:24], line.get("repeated")) for line in lines] == [
        ("Unable connect to node w", None),
        ("Unable to update metadat", None),
        ("kafka.unreachable", None),
        ("kafka.unreachable", None),
        ("Unable connect to node w", 199),
    ]
