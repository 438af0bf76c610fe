"""`crawlstream` child processes forked from one process that has already imported the service.

A test's worker, gateway or dispatcher is a real process of its own: its own pid, session and
log, killed with SIGKILL by its process group, its exit code reported as `asyncio`'s is. What
the fork saves is the interpreter's start and the imports (about a CPU second a process on
this machine, several hundred processes a run). The forked child runs `service.cli.main`
exactly as `python -m service` does and exits through the interpreter's own shutdown.

The server is this file run as a script; it speaks newline-delimited JSON on its stdin and
stdout: a request `{"id", "argv", "env", "cwd", "log"}` is answered `{"id", "pid"}`, and each
child's end `{"exit": pid, "rc": rc}`. It ends with its stdin.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import selectors
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

PRELOAD: Final = (
    "service.cli.main",
    "service.worker.app",
    "service.gateway",
    "service.webhooks",
    "playwright.async_api",
    "aiohttp",
    "aiokafka",
)
"""What a child would import anyway: imported once, here."""

START_DEADLINE_S: Final = 120.0
"""The server's own start (its imports on a loaded machine)."""

FORK_DEADLINE_S: Final = 30.0


class ForkedProcess:
    """The part of `asyncio.subprocess.Process` the harness uses, for a forked child."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.claimed = False
        """Handed to the caller of `spawn`."""
        self._ended = asyncio.Event()

    def ended(self, rc: int) -> None:
        self.returncode = rc
        self._ended.set()

    async def wait(self) -> int:
        await self._ended.wait()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


@dataclass
class ForkServer:
    """The test process's end of one server (one per event loop)."""

    process: asyncio.subprocess.Process
    children: dict[int, ForkedProcess] = field(default_factory=dict)
    waiting: dict[int, asyncio.Future[int]] = field(default_factory=dict)
    next_id: int = 0
    reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls) -> ForkServer:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        server = cls(process)
        assert process.stdout is not None
        ready = await asyncio.wait_for(process.stdout.readline(), START_DEADLINE_S)
        if json.loads(ready or b"{}").get("ready") is not True:
            msg = f"the fork server did not start: {ready!r}"
            raise RuntimeError(msg)
        server.listen()
        return server

    def listen(self) -> None:
        """Read the server's answers and its children's ends from now on."""
        self.reader = asyncio.create_task(self._read())

    async def spawn(self, argv: list[str], env: dict[str, str], log: Path) -> ForkedProcess:
        assert self.process.stdin is not None
        self.next_id += 1
        request_id = self.next_id
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting[request_id] = answer
        line = {"id": request_id, "argv": argv, "env": env, "cwd": str(Path.cwd()), "log": str(log)}
        self.process.stdin.write(json.dumps(line).encode() + b"\n")
        await self.process.stdin.drain()
        pid = await asyncio.wait_for(answer, FORK_DEADLINE_S)
        child = self.children.get(pid)
        if child is None or child.claimed:  # a pid the kernel gave an earlier child too
            child = self.children[pid] = ForkedProcess(pid)
        child.claimed = True
        return child

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            message = json.loads(line)
            if "exit" in message:
                child = self.children.get(message["exit"])
                if child is None or child.returncode is not None:  # its answer is still to come
                    child = self.children[message["exit"]] = ForkedProcess(message["exit"])
                child.ended(message["rc"])
            else:
                answer = self.waiting.pop(message["id"])
                if not answer.done():
                    answer.set_result(message["pid"])


_SERVERS: dict[asyncio.AbstractEventLoop, ForkServer] = {}
_STARTING: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}


async def spawn(argv: list[str], env: dict[str, str], log: Path) -> ForkedProcess:
    """`python -m service *argv` as a forked child of this loop's server (started on first use)."""
    loop = asyncio.get_running_loop()
    async with _STARTING.setdefault(loop, asyncio.Lock()):
        server = _SERVERS.get(loop)
        if server is None or server.process.returncode is not None:
            server = _SERVERS[loop] = await ForkServer.start()
    return await server.spawn(argv, env, log)


def _serve() -> None:
    """The server's loop: fork on request, report each child's end. Returns in a child."""
    for name in PRELOAD:
        importlib.import_module(name)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    _say({"ready": True})
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.fd == wake_read:
                os.read(wake_read, 4096)
                continue
            data = os.read(0, 65536)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    _become_child(request, (wake_read, wake_write))
                    return
                _say({"id": request["id"], "pid": pid})
        _reap()


def _become_child(request: dict[str, Any], server_fds: tuple[int, int]) -> None:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in server_fds:
        os.close(fd)
    os.setsid()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = ["crawlstream", *request["argv"]]
    importlib.import_module("service.cli.main").main(request["argv"])


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _say({"exit": pid, "rc": os.waitstatus_to_exitcode(status)})


def _say(message: dict[str, Any]) -> None:
    os.write(1, json.dumps(message).encode() + b"\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    _serve()
