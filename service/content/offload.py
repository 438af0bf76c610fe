"""Content work (parsing, selectors, Markdown, `extract`, structured data, PDF text) in a
small pool of child processes, each call within a time budget.

A page decides how much work its content takes: a valid selector can backtrack
exponentially over a 1 KB document of nested `div`s, a PDF of 18 KB can hold 100 MB of text.
Such work runs in native code that holds the interpreter's lock, so a thread cannot bound it
and the worker's event loop (heartbeats, `/healthz`, every other page) would stop with it.
In a child process it can be cut off: past `CRAWL_CONTENT_BUDGET` the child is killed and
replaced, the page ends `too_large`, and the worker and the other pages carry on.

The worker installs its pool for the process (`using`); without one (unit tests, tools) the
work runs in a thread as before, unbounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Self, TypeVar, TypeVarTuple, cast

import structlog

from service.errors import PermanentError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import TracebackType

    from service.settings import Settings

Ts = TypeVarTuple("Ts")
T = TypeVar("T")

log = structlog.get_logger(__name__)

_SIZE: Final = struct.Struct("!i")
_LONG_SIZE: Final = struct.Struct("!Q")
_SHORT_FRAME: Final = 0x7FFFFFFF
"""Frames as `multiprocessing.connection` writes them: a 4-byte size, or -1 and an 8-byte
size for a frame longer than this."""

_CHILD_MODULE: Final = "service.content._child"
"""What the template runs: a fresh interpreter (forking the worker, a process with threads
and an event loop, would copy their locks in whatever state they are), given its end of a
socket pair; it forks the children."""

_TEMPLATE_CODE: Final = (
    "import sys; sys.modules['rich'] = None; import runpy; "
    f"runpy.run_module({_CHILD_MODULE!r}, run_name='__main__', alter_sys=True)"
)
"""How the interpreter runs it: without `rich`, which structlog imports whenever it can (for
a terminal's tracebacks, which a content process never prints): 0.25 of the 0.85 CPU s its
imports took."""

LONG_CALL_S: Final = 1.0
"""A call running longer than this sinks its child to `SUNK_NICENESS` (real pages take tens of
milliseconds); the child is replaced after the call."""

SUNK_NICENESS: Final = 19

START_DEADLINE_S: Final = 60.0
"""How long a new child may take to say it is ready (the template's imports included)."""

STOP_DEADLINE_S: Final = 2.0
"""How long a child or the template may take to exit when the pool closes before it is
killed."""


class ContentBudgetError(PermanentError):
    """A page's content work ran past the worker's budget; its process was killed."""


class ContentFailedError(PermanentError):
    """A content process died, or its answer could not be sent back."""


class _Forked:
    """The part of `subprocess.Popen` a template uses, for a template forked from this
    process (`reserve`), which this process reaps."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid == 0:
                    return None
                self.returncode = os.waitstatus_to_exitcode(status)
            if self.returncode is None:  # reaped by someone else
                self.returncode = 0
        return self.returncode

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(_REAP_STEP_S)
        return code

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


_REAP_STEP_S: Final = 0.01


@dataclass(slots=True, eq=False)
class _Template:
    """The process that has imported the content work and forks the children."""

    process: subprocess.Popen[bytes] | _Forked
    control: socket.socket

    @classmethod
    def start(cls) -> _Template:
        ours, theirs = socket.socketpair()
        with theirs:
            process = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
                [sys.executable, "-c", _TEMPLATE_CODE, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        return cls(process=process, control=ours)

    @classmethod
    def fork(cls, loop: Callable[[socket.socket], None]) -> _Template:
        """The template as a fork of this process running `loop` on its end of the socket;
        this process must run one thread and no event loop (see `reserve`)."""
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child's coverage is not collected)
            code = 0
            try:
                ours.close()
                loop(theirs)
            except BaseException:  # noqa: BLE001 (a fork must never return into the caller)
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        return cls(process=_Forked(pid), control=ours)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def spawn(self) -> socket.socket:
        """The worker's end of a socket to a new child (ready once it sends its pid); OSError
        when the template is gone."""
        ours, theirs = socket.socketpair()
        with theirs:
            socket.send_fds(self.control, [b"f"], [theirs.fileno()])
        return ours

    async def stop(self) -> None:
        self.control.close()  # the template's loop ends on EOF
        await asyncio.to_thread(self._reap)

    def _reap(self) -> None:
        try:
            self.process.wait(STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_DEADLINE_S)


_reserved: list[_Template] = []


def reserve(loop: Callable[[socket.socket], None]) -> None:
    """Fork the content template (running `loop`) from this process now, for the first
    `ContentPool` to take; nothing while other threads run (a fork could copy a lock one of
    them holds). See `service.content.template.reserve_template`."""
    if threading.active_count() == 1 and not _reserved:
        _reserved.append(_Template.fork(loop))


@dataclass(slots=True, eq=False)
class _Child:
    """A content process and the worker's end of its socket (framed as
    `multiprocessing.connection.Connection` frames them, which the child uses)."""

    sock: socket.socket
    pid: int | None = None
    """Known once the child said it is ready (its first message)."""
    pidfd: int | None = None
    """The child as a process, not a number: the template reaps it, and its pid may be
    another process's by the time the worker signals it (pids wrap at 32,768 on a host
    whose browsers start thousands of processes)."""
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    sunk: bool = False
    """The child runs a long call at the lowest priority (`sink`)."""

    @property
    def ready(self) -> bool:
        return self.pid is not None

    def known(self, pid: int) -> None:
        """The child said it is ready: hold it by a pidfd (ContentFailedError if it is gone)."""
        try:
            self.pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            raise ContentFailedError(f"the content process {pid} ended as it started") from None
        self.pid = pid

    def sink(self) -> None:
        """Lower the child to `SUNK_NICENESS`: a call this long is likely a bomb, and the
        other child's pages (a canary of 20 ms of work) should not share a core with it."""
        if self.pid is None or not self._signal(0):  # gone: its pid may be another's
            return
        with contextlib.suppress(OSError):  # it has just ended
            os.setpriority(os.PRIO_PROCESS, self.pid, SUNK_NICENESS)
            self.sunk = True

    async def send(self, value: object) -> None:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(sock=self.sock)
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) > _SHORT_FRAME:
            self.writer.write(_SIZE.pack(-1) + _LONG_SIZE.pack(len(data)))
        else:
            self.writer.write(_SIZE.pack(len(data)))
        self.writer.write(data)
        await self.writer.drain()

    async def receive(self) -> object:
        """The child's next message (ContentFailedError when it died)."""
        if self.reader is None:
            self.reader, self.writer = await asyncio.open_connection(sock=self.sock)
        try:
            (size,) = _SIZE.unpack(await self.reader.readexactly(_SIZE.size))
            if size == -1:
                (size,) = _LONG_SIZE.unpack(await self.reader.readexactly(_LONG_SIZE.size))
            return pickle.loads(await self.reader.readexactly(size))  # noqa: S301 (our child)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise ContentFailedError(f"the content process {self.pid} died") from exc

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        self._close()

    async def stop(self) -> None:
        """Close the child's socket (its loop ends on EOF) and wait until it is gone."""
        self._close_socket()
        exited = self.pidfd
        if exited is None:
            return
        gone = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_reader(exited, gone.set)  # readable once the process has ended
        try:
            async with asyncio.timeout(STOP_DEADLINE_S):
                await gone.wait()
        except TimeoutError:
            self._signal(signal.SIGKILL)
        finally:
            loop.remove_reader(exited)
            self._forget()

    def _signal(self, number: int) -> bool:
        """Send `number` to the child (0: only ask whether it is alive); False once it is
        gone (the template reaps it)."""
        if self.pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, number)
        except ProcessLookupError:
            return False
        return True

    def _close(self) -> None:
        self._close_socket()
        self._forget()

    def _close_socket(self) -> None:
        if self.writer is not None:
            self.writer.close()
        else:
            self.sock.close()

    def _forget(self) -> None:
        pidfd, self.pidfd = self.pidfd, None
        if pidfd is not None:
            os.close(pidfd)


@dataclass(slots=True)
class ContentPool:
    """`async with ContentPool(processes=2, budget_s=20) as pool:` children for content work;
    `await pool.run(function, *arguments)` runs a module-level function in one of them."""

    processes: int
    budget_s: float
    _idle: asyncio.Queue[_Child] = field(default_factory=asyncio.Queue)
    _busy: set[_Child] = field(default_factory=set)
    _template: _Template | None = None
    killed: int = 0
    """Children killed for running past the budget (or abandoned by their caller)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> ContentPool:
        return cls(
            processes=settings.content_processes,
            budget_s=settings.content_budget.total_seconds(),
        )

    async def __aenter__(self) -> Self:
        for _ in range(self.processes):
            self._add(self._new_child())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        while not self._idle.empty():
            await self._idle.get_nowait().stop()
        for child in list(self._busy):
            child.kill()
        if self._template is not None:
            await self._template.stop()

    async def run(self, function: Callable[[*Ts], T], *arguments: *Ts) -> T:
        """`function(*arguments)` in a child, within the budget; raises its exception, or
        ContentBudgetError past the budget (the child is replaced), or ContentFailedError
        when the child died."""
        child = await self._idle.get()
        self._busy.add(child)
        try:
            if not child.ready:
                await self._started(child)
            sinking = asyncio.get_running_loop().call_later(LONG_CALL_S, child.sink)
            try:
                ok, value = await self._exchange(child, (function, arguments))
            finally:
                sinking.cancel()
        except BaseException:
            self._busy.discard(child)
            self._replace(child)
            raise
        self._busy.discard(child)
        if child.sunk:  # its priority cannot be raised again without privileges
            await child.stop()
            child = self._new_child()
        self._idle.put_nowait(child)
        if not ok:
            raise cast("BaseException", value)
        return cast("T", value)

    async def _started(self, child: _Child) -> None:
        try:
            async with asyncio.timeout(START_DEADLINE_S):
                child.known(cast("int", await child.receive()))
        except TimeoutError:
            message = f"a content process did not start within {START_DEADLINE_S:g} s"
            raise ContentFailedError(message) from None

    async def _exchange(self, child: _Child, call: object) -> tuple[bool, object]:
        """Send the call and read its answer without holding the event loop (a large page
        or answer streams through the socket as the child, at a lower priority, gets CPU)."""
        try:
            async with asyncio.timeout(self.budget_s):
                await child.send(call)
                return cast("tuple[bool, object]", await child.receive())
        except TimeoutError:
            message = f"content work ran past the worker's budget of {self.budget_s:g} s"
            raise ContentBudgetError(message) from None

    def _add(self, child: _Child) -> None:
        self._idle.put_nowait(child)

    def _replace(self, child: _Child) -> None:
        self.killed += 1
        log.warning("content.child_killed", pid=child.pid, budget_s=self.budget_s)
        child.kill()
        self._add(self._new_child())

    def _new_child(self) -> _Child:
        """A child forked by the template (started, or started again when it died)."""
        if self._template is None and _reserved:
            self._template = _reserved.pop()
        if self._template is None or not self._template.alive:
            self._template = _Template.start()
        try:
            return _Child(sock=self._template.spawn())
        except OSError:
            self._template.process.kill()
            self._template = _Template.start()
            return _Child(sock=self._template.spawn())


_installed: list[ContentPool] = []


@contextlib.contextmanager
def using(pool: ContentPool) -> Iterator[ContentPool]:
    """Content work of this process runs in `pool` while the block runs."""
    _installed.append(pool)
    try:
        yield pool
    finally:
        _installed.remove(pool)


def budget_s() -> float | None:
    """The installed pool's budget per call (None: no pool, no budget)."""
    return _installed[-1].budget_s if _installed else None


async def offloaded(function: Callable[[*Ts], T], *arguments: *Ts) -> T:
    """`function(*arguments)` in the installed pool, or in a thread when there is none."""
    if _installed:
        return await _installed[-1].run(function, *arguments)
    return await asyncio.to_thread(function, *arguments)
