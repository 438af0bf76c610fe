"""Many idle TCP connections at one port, as hostile local processes would open them.

Run as a script (`python flood.py HOST PORT COUNT`), it opens COUNT connections, sends nothing
on them, reports `opened N failed M` on stdout as it goes and `done N M` at the end, then holds
every socket until its standard input closes. `flooding()` runs as many such processes as the
descriptor limit requires (a process may not raise its hard limit without privilege), and
adds up their reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import resource
import socket
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

IN_FLIGHT = 1_000
"""Connection attempts under way at once in one process."""

CONNECT_DEADLINE_S = 60.0
"""How long one attempt may take (SYNs dropped by a full accept queue are resent)."""

SPARE_DESCRIPTORS = 256
"""Descriptors a flooding process keeps free beyond its sockets."""

MAX_PER_PROCESS = 12_500
"""Most connections one process opens."""

ATTEMPTS = 5
"""Tries of one connection, as a determined flooder makes them: on a loaded machine a few
attempts time out or are refused while the accept queue is full, and are made again."""

REPORT_EVERY = 500
"""A progress line after this many more attempts have ended."""


@dataclass(slots=True)
class _Tally:
    opened: list[socket.socket] = field(default_factory=list)
    failed: int = 0

    def line(self, word: str) -> str:
        return f"{word} {len(self.opened)} {self.failed}"


async def _connect_one(tally: _Tally, address: tuple[str, int], limit: asyncio.Semaphore) -> None:
    loop = asyncio.get_running_loop()
    async with limit:
        for _ in range(ATTEMPTS):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)  # noqa: FBT003
            try:
                async with asyncio.timeout(CONNECT_DEADLINE_S):
                    await loop.sock_connect(sock, address)
            except (OSError, TimeoutError):
                sock.close()
            else:
                tally.opened.append(sock)
                break
        else:
            tally.failed += 1
    if (len(tally.opened) + tally.failed) % REPORT_EVERY == 0:
        print(tally.line("opened"), flush=True)  # noqa: T201


async def _flood(host: str, port: int, count: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tally = _Tally()
    limit = asyncio.Semaphore(IN_FLIGHT)
    await asyncio.gather(*(_connect_one(tally, (host, port), limit) for _ in range(count)))
    print(tally.line("done"), flush=True)  # noqa: T201
    await asyncio.to_thread(sys.stdin.read)  # hold every socket until told to stop
    for sock in tally.opened:
        sock.close()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@dataclass(slots=True)
class Flood:
    """The flooding processes and what each reported last: (opened, failed)."""

    processes: list[asyncio.subprocess.Process] = field(default_factory=list)
    reports: list[tuple[int, int]] = field(default_factory=list)
    done: list[bool] = field(default_factory=list)

    @property
    def opened(self) -> int:
        return sum(opened for opened, _ in self.reports)

    @property
    def failed(self) -> int:
        return sum(failed for _, failed in self.reports)

    @property
    def finished(self) -> bool:
        return all(self.done)

    async def wait(self, condition: str, deadline_s: float) -> None:
        """Wait until `opened >= N` (`condition` is `"opened:N"`) or every process is done."""
        kind, _, number = condition.partition(":")
        async with asyncio.timeout(deadline_s):
            while not (self.finished if kind == "done" else self.opened >= int(number)):
                if any(process.returncode is not None for process in self.processes):
                    raise AssertionError("a flooding process died")
                await asyncio.sleep(0.2)


def processes_for(count: int) -> int:
    """Processes needed for `count` sockets under this machine's hard descriptor limit."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    per_process = min(MAX_PER_PROCESS, hard - SPARE_DESCRIPTORS)
    return math.ceil(count / per_process)


@asynccontextmanager
async def flooding(host: str, port: int, count: int) -> AsyncIterator[Flood]:
    """Open `count` connections to `host`:`port` from helper processes, in the background;
    they are all closed when the block ends."""
    flood = Flood()
    shares = processes_for(count)
    readers = []
    for index in range(shares):
        share = count // shares + (1 if index < count % shares else 0)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(Path(__file__)),
            host,
            str(port),
            str(share),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        flood.processes.append(process)
        flood.reports.append((0, 0))
        flood.done.append(False)
        readers.append(asyncio.create_task(_follow(flood, index, process)))
    try:
        yield flood
    finally:
        for process in flood.processes:
            if process.stdin is not None:
                process.stdin.close()
        for process in flood.processes:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), CONNECT_DEADLINE_S)
            if process.returncode is None:
                process.kill()
                await process.wait()
        await asyncio.gather(*readers, return_exceptions=True)


async def _follow(flood: Flood, index: int, process: asyncio.subprocess.Process) -> None:
    assert process.stdout is not None
    async for raw in process.stdout:
        word, opened, failed = raw.decode().split()
        flood.reports[index] = (int(opened), int(failed))
        flood.done[index] = flood.done[index] or word == "done"


if __name__ == "__main__":
    asyncio.run(_flood(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
