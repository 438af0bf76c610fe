"""Running shell lines that call kcat (the third-party client of docs/contracts.md) with deadlines.

`run` waits for a line that ends by itself; `follow_in_terminal` runs one that never ends on
a pseudo-terminal, as a person at a shell would, and reads it until a wanted line appears.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import re
import select
import shutil
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

LINE_DEADLINE_S = 90.0
"""Longest a line that ends by itself may take (a produce waits for its acknowledgement)."""

READ_BYTES = 65_536
"""Bytes read from the terminal at a time."""


def kcat_or_skip() -> str:
    """kcat's path; the test skips when it is not installed (`make setup` installs it)."""
    path = shutil.which("kcat")
    if path is None:
        pytest.skip("kcat is not installed (make setup installs Debian's kcat where apt works)")
    return path


@dataclass(frozen=True, slots=True)
class Ran:
    """What a shell line printed and how it ended."""

    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def lines(self) -> list[str]:
        """Standard output as strict UTF-8 lines (invalid bytes fail the test here)."""
        return self.stdout.decode().splitlines()


async def run(line: str, env: dict[str, str], cwd: Path) -> Ran:
    """Run `line` with bash; kill its process group when the deadline passes."""
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        line,
        env=os.environ | env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), LINE_DEADLINE_S)
    finally:
        _kill_group(process.pid)
    assert process.returncode is not None
    return Ran(process.returncode, stdout, stderr)


async def follow_in_terminal(
    line: str, env: dict[str, str], cwd: Path, until: Callable[[str], bool], deadline_s: float
) -> list[str]:
    """Run `line` with its output on a terminal; the lines read up to the first one that
    satisfies `until`. Fails when none has within the deadline; the line is stopped after."""
    controller, terminal = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        line,
        env=os.environ | env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=terminal,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(terminal)
    try:
        return await asyncio.to_thread(_read_until, controller, until, deadline_s)
    finally:
        _kill_group(process.pid)
        await process.wait()
        os.close(controller)


def _read_until(fd: int, until: Callable[[str], bool], deadline_s: float) -> list[str]:
    end = time.monotonic() + deadline_s
    buffer = b""
    while (left := end - time.monotonic()) > 0:
        readable, _, _ = select.select([fd], [], [], left)
        if readable:
            try:
                buffer += os.read(fd, READ_BYTES)
            except OSError:  # EIO: the line ended, nothing more will come
                break
            *whole, _ = buffer.decode(errors="replace").split("\n")  # drop a partial line
            lines = [text.rstrip("\r") for text in whole]
            if any(until(text) for text in lines):
                return lines
    message = f"no wanted line within {deadline_s} s; the terminal showed {buffer[-2000:]!r}"
    raise AssertionError(message)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def shell_commands(markdown: str, heading: str) -> list[str]:
    """The commands of the first `sh` block under `heading`, continuation lines joined."""
    section = markdown.split(heading, 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no sh block under {heading}"
    joined = match.group(1).replace("\\\n", " ")
    return [command.strip() for command in joined.splitlines() if command.strip()]
