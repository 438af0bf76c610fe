"""The memory of a process and all its descendants, read from `/proc`.

PSS (proportional set size) splits shared pages between the processes that map them, so summing
it over a Chromium tree does not count the shared libraries and shared memory once per process,
as summing RSS would. RSS is the fallback where `smaps_rollup` is unreadable.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

KIB = 1024
"""`/proc` reports memory in kibibytes."""

PPID_FIELD = 1
"""Index of the parent pid among the `/proc/PID/stat` fields after the `(comm)` field."""

PSS_WALK_S: Final = 5.0
"""Longest time between two readings of every process's PSS (`TreeMemory`)."""

WALK_ON_GROWTH_BYTES: Final = 256 * 1024**2
"""Anonymous memory the tree may gain before its PSS is read again, at most; near the limit
less (`WALK_ON_GROWTH_SHARE`)."""

WALK_ON_GROWTH_SHARE: Final = 8
"""... and at most this fraction (1/N) of the headroom left."""


class TreeMemory:
    """The summed PSS of a process tree, read again only when it may have changed enough.

    Reading a process's PSS (`smaps_rollup`) makes the kernel walk its page tables: about
    27 CPU ms for a worker with ten Chromium contexts here, which read every second was a
    quarter of the worker's own CPU on the browser path. Its anonymous RSS (`status`) costs
    no walk. So PSS is read again when the tree's anonymous RSS grew by more than
    `WALK_ON_GROWTH_BYTES` or an eighth of the headroom since the last reading, or
    `PSS_WALK_S` passed: far from the limit every few seconds, near it every time.
    The figure is always a PSS reading (it never counts shared pages whole), at most that
    much growth behind.
    """

    def __init__(
        self,
        proc_root: Path,
        root_pid: int,
        *,
        walk_s: float = PSS_WALK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._proc_root = proc_root
        self._root_pid = root_pid
        self._walk_s = walk_s
        self._clock = clock
        self._walked_at: float | None = None
        self._anon_at_walk = 0
        self._pss = 0
        self.walks = 0
        """PSS readings taken so far."""
        self._table = ProcessTable(proc_root)

    def read(self, headroom_bytes: int | None = None) -> int:
        """Bytes used by the tree (PSS), read again if due; `headroom_bytes` is the
        headroom of the last snapshot (None: unknown, read)."""
        pids = self._table.tree(self._root_pid)
        anon = sum(_anonymous(self._proc_root, pid) for pid in pids)
        now = self._clock()
        if headroom_bytes is None:
            allowed = 0
        else:
            allowed = min(WALK_ON_GROWTH_BYTES, headroom_bytes // WALK_ON_GROWTH_SHARE)
        due = self._walked_at is None or now - self._walked_at >= self._walk_s
        if due or anon - self._anon_at_walk >= allowed:
            self._walked_at = now
            self._anon_at_walk = anon
            self._pss = sum(process_memory(self._proc_root, pid) for pid in pids)
            self.walks += 1
        return self._pss


class ProcessTable:
    """The parent of every process, kept from one look to the next.

    A look lists `/proc` (one directory read) and reads the `stat` of the processes it has
    not seen before, and again of those whose parent has exited since (they were given a new
    one). Reading every process's `stat` on every look cost 70 microseconds a process here,
    4.7 ms a look with 69 processes on the machine, and grows with everything else the
    machine runs. A pid is taken to name the same process from one look to the next: the
    kernel hands pids (threads' too) out in order up to `pid_max`, so a pid comes back only
    after the counter went round all of them (32,768 here: a test suite's run goes round
    every few minutes, a look comes every second).
    """

    def __init__(self, proc_root: Path) -> None:
        self._proc_root = proc_root
        self._parents: dict[int, int] = {}

    def tree(self, root_pid: int) -> list[int]:
        """`root_pid` followed by all its living descendants (children, grandchildren, ...)."""
        children: dict[int, list[int]] = defaultdict(list)
        for pid, ppid in self._look().items():
            children[ppid].append(pid)
        found = [root_pid]
        for pid in found:
            found.extend(children.get(pid, ()))
        return found

    def _look(self) -> dict[int, int]:
        try:  # names, not `Path`s: 84 against 297 microseconds for 67 processes here
            listed = {int(name) for name in os.listdir(self._proc_root) if name.isdigit()}  # noqa: PTH208
        except OSError:
            return {}
        parents = self._parents
        gone = parents.keys() - listed
        for pid in gone:
            del parents[pid]
        orphans = [pid for pid, ppid in parents.items() if ppid in gone]
        for pid in [*(listed - parents.keys()), *orphans]:
            ppid = _parent_pid(self._proc_root / str(pid) / "stat")
            if ppid is None:  # exited while we looked
                parents.pop(pid, None)
            else:
                parents[pid] = ppid
        return parents


def tree_pids(proc_root: Path, root_pid: int) -> list[int]:
    """`root_pid` followed by all its living descendants (children, grandchildren, ...)."""
    return ProcessTable(proc_root).tree(root_pid)


def tree_memory(proc_root: Path, root_pid: int) -> int:
    """Summed PSS (RSS as fallback) of `root_pid` and its descendants, in bytes."""
    return sum(process_memory(proc_root, pid) for pid in tree_pids(proc_root, root_pid))


def process_memory(proc_root: Path, pid: int) -> int:
    """PSS of one process in bytes; its RSS if PSS is unreadable; 0 if it is gone."""
    directory = proc_root / str(pid)
    pss = _kib_field(directory / "smaps_rollup", "Pss:")
    if pss is None:
        pss = _kib_field(directory / "status", "VmRSS:")
    return (pss or 0) * KIB


def _anonymous(proc_root: Path, pid: int) -> int:
    """Anonymous RSS of one process in bytes (its RSS where not reported); 0 if it is gone."""
    status = proc_root / str(pid) / "status"
    kib = _kib_field(status, "RssAnon:")
    if kib is None:
        kib = _kib_field(status, "VmRSS:")
    return (kib or 0) * KIB


def host_memory_total(proc_root: Path) -> int | None:
    """`MemTotal` of `/proc/meminfo`, in bytes."""
    total = _kib_field(proc_root / "meminfo", "MemTotal:")
    return None if total is None else total * KIB


def _parent_pid(stat: Path) -> int | None:
    try:
        text = stat.read_text()
    except OSError:  # the process exited while we walked
        return None
    fields = text[text.rfind(")") + 1 :].split()  # comm may hold spaces and parentheses
    return int(fields[PPID_FIELD]) if len(fields) > PPID_FIELD else None


def _kib_field(path: Path, key: str) -> int | None:
    """The kibibyte figure on the line starting with `key` (e.g. `Pss:   476 kB`)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    values = (line.split()[1:2] for line in lines if line.startswith(key))
    return next((int(value[0]) for value in values if value and value[0].isdigit()), None)
