"""The test process's end of the fork server: which child an answer or an exit names.

A suite run starts tens of thousands of processes (Chromium's above all) and `pid_max` is
32,768 here, so the kernel hands a pid out again within one run; a worker given the pid of
an earlier, ended child was taken for that child and reported as exited on its start.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from forkserver import ForkedProcess, ForkServer

DEADLINE_S = 5.0


class _Stdin:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.requests.append(json.loads(data))

    async def drain(self) -> None:
        return None


class _ServerProcess:
    """The server's pipes, fed by the test instead of a forked server."""

    def __init__(self) -> None:
        self.stdin = _Stdin()
        self.stdout = asyncio.StreamReader()
        self.returncode = None

    def say(self, message: dict[str, int]) -> None:
        self.stdout.feed_data(json.dumps(message).encode() + b"\n")


async def _spawned(server: ForkServer, process: _ServerProcess, pid: int) -> ForkedProcess:
    """`spawn`, answered with `pid` once its request was sent."""
    spawning = asyncio.create_task(server.spawn(["worker"], {}, Path("worker.log")))
    async with asyncio.timeout(DEADLINE_S):
        while not server.waiting:
            await asyncio.sleep(0.01)
    process.say({"id": process.stdin.requests[-1]["id"], "pid": pid})
    return await asyncio.wait_for(spawning, DEADLINE_S)


async def test_a_pid_handed_out_again_names_the_new_child_not_the_ended_one():
    process = _ServerProcess()
    server = ForkServer(process)  # type: ignore[arg-type]
    server.listen()
    first = await _spawned(server, process, 7)
    process.say({"exit": 7, "rc": 0})
    assert await asyncio.wait_for(first.wait(), DEADLINE_S) == 0

    second = await _spawned(server, process, 7)
    assert second is not first
    assert second.returncode is None
    process.say({"exit": 7, "rc": 3})
    assert await asyncio.wait_for(second.wait(), DEADLINE_S) == 3
    assert first.returncode == 0
    assert server.reader is not None
    server.reader.cancel()


async def test_an_exit_read_before_its_spawn_resumed_ends_that_child():
    """The answer and the exit of a child that died at once come in one read."""
    process = _ServerProcess()
    server = ForkServer(process)  # type: ignore[arg-type]
    server.listen()
    first = await _spawned(server, process, 9)
    process.say({"exit": 9, "rc": 0})
    await asyncio.wait_for(first.wait(), DEADLINE_S)

    spawning = asyncio.create_task(server.spawn(["worker"], {}, Path("worker.log")))
    async with asyncio.timeout(DEADLINE_S):
        while not server.waiting:
            await asyncio.sleep(0.01)
    process.say({"id": process.stdin.requests[-1]["id"], "pid": 9})
    process.say({"exit": 9, "rc": 1})
    second = await asyncio.wait_for(spawning, DEADLINE_S)
    assert second is not first
    assert await asyncio.wait_for(second.wait(), DEADLINE_S) == 1
    assert server.reader is not None
    server.reader.cancel()
