"""What an operator's log pipeline reads from a normal worker start: one JSON object per line."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

ASSIGNED_DEADLINE_S = 90.0
"""From `worker.started` to the first `consumer.assigned` on a fresh group."""


def _not_json(lines: list[str]) -> list[str]:
    wrong = []
    for line in lines:
        try:
            parsed = json.loads(line)
        except ValueError:
            wrong.append(line)
            continue
        if not isinstance(parsed, dict) or "level" not in parsed:
            wrong.append(line)
    return wrong


async def test_a_normal_start_and_stop_log_only_json_and_no_error(start_worker):
    """A worker that starts on a new group, is assigned its partitions and stops on SIGTERM writes
    only JSON lines with a level, and none of them at error level (aiokafka's coordinator
    look-ups while a group forms included)."""
    worker = await start_worker("w1")
    await worker.wait_for_log("consumer.assigned", ASSIGNED_DEADLINE_S)
    assert await worker.terminate() == 0

    lines = worker.log_path.read_text(errors="replace").splitlines()
    assert _not_json(lines) == []
    entries = [json.loads(line) for line in lines]
    assert [e for e in entries if e["level"] in {"error", "critical"}] == []
    assert {"worker.started", "consumer.assigned", "worker.stopped"} <= {
        e["event"] for e in entries
    }
