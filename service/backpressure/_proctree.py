"""The memory of a process and all its descendants, read from `/proc`.

PSS (proportional set size) splits shared pages between the processes that map them, so summing
it over a Chromium tree does not count the shared libraries and shared memory once per process,
as summing RSS would. RSS is the fallback where `smaps_rollup` is unreadable.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

KIB = 1024
"""`/proc` reports memory in kibibytes."""

PPID_FIELD = 1
"""Index of the parent pid among the `/proc/PID/stat` fields after the `(comm)` field."""


def tree_pids(proc_root: Path, root_pid: int) -> list[int]:
    """`root_pid` followed by all its living descendants (children, grandchildren, ...)."""
    children = _children_by_parent(proc_root)
    found = [root_pid]
    for pid in found:
        found.extend(children.get(pid, ()))
    return found


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


def host_memory_total(proc_root: Path) -> int | None:
    """`MemTotal` of `/proc/meminfo`, in bytes."""
    total = _kib_field(proc_root / "meminfo", "MemTotal:")
    return None if total is None else total * KIB


def _children_by_parent(proc_root: Path) -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for pid, ppid in _parents(proc_root):
        children[ppid].append(pid)
    return children


def _parents(proc_root: Path) -> Iterator[tuple[int, int]]:
    """(pid, parent pid) of every process that can still be read."""
    for entry in proc_root.iterdir():
        if entry.name.isdigit():
            ppid = _parent_pid(entry / "stat")
            if ppid is not None:
                yield int(entry.name), ppid


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
