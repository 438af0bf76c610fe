"""A memory cgroup of the test's own (cgroup v1 or v2) with a hard limit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Self

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


def _own_v1_path() -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return V1_ROOT / path.lstrip("/")
    return V1_ROOT


def writable_hierarchy() -> str | None:
    """'v1' or 'v2' when this process may create a memory cgroup, else None."""
    if (V1_ROOT / "memory.limit_in_bytes").exists() and os.access(_own_v1_path(), os.W_OK):
        return "v1"
    if (V2_ROOT / "cgroup.controllers").exists() and os.access(V2_ROOT, os.W_OK):
        return "v2"
    return None


class MemoryCgroup:
    """Created on enter, removed on exit; processes join it through `join_current`.

    `limit_bytes` None leaves it unlimited; `parent` nests it in another test cgroup (enter the
    parent first), as a pod's containers sit under the pod's cgroup.
    """

    def __init__(self, limit_bytes: int | None, *, parent: MemoryCgroup | None = None) -> None:
        self.version = writable_hierarchy()
        if parent is not None:
            base = parent.path
        else:
            base = _own_v1_path() if self.version == "v1" else V2_ROOT
        self.path = base / f"crawlstream-test-{uuid.uuid4().hex[:8]}"
        self.limit_bytes = limit_bytes

    def __enter__(self) -> Self:
        self.path.mkdir()
        if self.version == "v2" and self.path.parent != V2_ROOT:  # enable it for the children
            (self.path.parent / "cgroup.subtree_control").write_text("+memory")
        if self.limit_bytes is None:
            return self
        if self.version == "v1":
            (self.path / "memory.limit_in_bytes").write_text(str(self.limit_bytes))
            with contextlib.suppress(OSError):  # no swap accounting: nothing to cap
                (self.path / "memory.memsw.limit_in_bytes").write_text(str(self.limit_bytes))
        else:
            (self.path / "memory.max").write_text(str(self.limit_bytes))
            (self.path / "memory.swap.max").write_text("0")
        return self

    def __exit__(self, *_: object) -> None:
        deadline = time.monotonic() + 30
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        with contextlib.suppress(OSError):
            self.path.rmdir()

    def join_current(self) -> None:
        """Move the calling process in (use as a subprocess's `preexec_fn`)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        text = (self.path / "cgroup.procs").read_text()
        return [int(line) for line in text.split()]

    def oom_kills(self) -> int:
        name, key = (
            ("memory.oom_control", "oom_kill")
            if self.version == "v1"
            else ("memory.events", "oom_kill")
        )
        for line in (self.path / name).read_text().splitlines():
            field, _, value = line.partition(" ")
            if field == key:
                return int(value)
        return 0

    def usage_bytes(self) -> int:
        """The cgroup's (hierarchical) usage now."""
        name = "memory.usage_in_bytes" if self.version == "v1" else "memory.current"
        return int((self.path / name).read_text())

    def peak_bytes(self) -> int:
        name = "memory.max_usage_in_bytes" if self.version == "v1" else "memory.peak"
        with contextlib.suppress(OSError):
            return int((self.path / name).read_text())
        return 0


HOLDER_SCRIPT = """
import sys
held = bytearray(b"\\x01") * int(sys.argv[1])  # written, so every page is resident
print("holding", flush=True)
sys.stdin.read()
"""
"""A sidecar: holds `argv[1]` bytes of touched memory until its standard input closes."""


class MemoryHolder:
    """A process in `cgroup` that holds `nbytes` of resident memory while entered."""

    def __init__(self, cgroup: MemoryCgroup, nbytes: int, *, deadline_s: float = 60.0) -> None:
        self.cgroup = cgroup
        self.nbytes = nbytes
        self.deadline_s = deadline_s
        self.process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Self:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            HOLDER_SCRIPT,
            str(self.nbytes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            preexec_fn=self.cgroup.join_current,
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), self.deadline_s)
        if line.strip() != b"holding":
            raise RuntimeError(f"the memory holder did not start: {line!r}")
        return self

    async def __aexit__(self, *_: object) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            process.kill()
        if process is not None:
            await asyncio.wait_for(process.wait(), self.deadline_s)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None
