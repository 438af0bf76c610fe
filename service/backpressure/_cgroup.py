"""Read a process's memory cgroup (v2 or v1): limit, working set, OOM kills.

Readers return None (or nothing) when a file is missing or unreadable, so a host without
cgroups, or a kernel without a given file, falls through to the next source instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

UNLIMITED_THRESHOLD = 1 << 60
"""Limits at or above this mean "no limit" (v1 writes LONG_MAX rounded down to a page)."""

V1_CONTROLLER = "memory"
"""Name of the v1 memory controller, and of its hierarchy's directory under the cgroup root."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Layout:
    """The file and key names one cgroup version uses."""

    version: int
    usage_file: str
    limit_file: str
    inactive_key: str
    oom_file: str


V2 = _Layout(
    version=2,
    usage_file="memory.current",
    limit_file="memory.max",
    inactive_key="inactive_file",
    oom_file="memory.events",
)
V1 = _Layout(
    version=1,
    usage_file="memory.usage_in_bytes",
    limit_file="memory.limit_in_bytes",
    inactive_key="total_inactive_file",
    oom_file="memory.oom_control",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupReading:
    """One read of the cgroup files that matter for memory."""

    version: int
    limit_bytes: int | None
    """Smallest limit of the cgroup and its visible ancestors; None when unlimited."""
    working_set_bytes: int
    """Usage minus inactive file cache (the kernel reclaims that before it OOM-kills)."""
    oom_kills: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryCgroup:
    """Where a process's memory cgroup lives, and how to read it."""

    layout: _Layout
    directory: Path
    mount: Path

    def read(self) -> CgroupReading | None:
        usage = _read_int(self.directory / self.layout.usage_file)
        if usage is None:
            return None
        stat = _read_keyed(self.directory / "memory.stat")
        return CgroupReading(
            version=self.layout.version,
            limit_bytes=self._limit(stat),
            working_set_bytes=max(usage - stat.get(self.layout.inactive_key, 0), 0),
            oom_kills=_read_keyed(self.directory / self.layout.oom_file).get("oom_kill"),
        )

    def _limit(self, stat: dict[str, int]) -> int | None:
        limits = [_read_int(directory / self.layout.limit_file) for directory in self._lineage()]
        limits.append(stat.get("hierarchical_memory_limit"))  # v1 only: covers hidden ancestors
        bounded = [limit for limit in limits if limit is not None and limit < UNLIMITED_THRESHOLD]
        return min(bounded, default=None)

    def _lineage(self) -> list[Path]:
        """The cgroup directory and its ancestors up to the hierarchy's mount."""
        lineage = [self.directory]
        while self.mount in lineage[-1].parents:
            lineage.append(lineage[-1].parent)
        return lineage


def locate(cgroup_root: Path, proc_cgroup: Path) -> MemoryCgroup | None:
    """The memory cgroup named in `proc_cgroup` (a `/proc/PID/cgroup` file), if one is usable.

    cgroup v2 (`0::/path`) wins when its memory controller is there; else the v1 `memory` line.
    """
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    paths = dict(_parse_line(line) for line in lines if line.count(":") > 1)
    v2 = _usable(V2, cgroup_root, paths[""]) if "" in paths else None
    if v2 is None and V1_CONTROLLER in paths:
        return _usable(V1, cgroup_root / V1_CONTROLLER, paths[V1_CONTROLLER])
    return v2


def _parse_line(line: str) -> tuple[str, str]:
    """`4:memory:/a/b` -> ("memory", "/a/b"); `0::/a` -> ("", "/a"); co-mounts pick memory."""
    _, controllers, path = line.split(":", 2)
    names = controllers.split(",")
    return (V1_CONTROLLER if V1_CONTROLLER in names else controllers, path)


def _usable(layout: _Layout, mount: Path, path: str) -> MemoryCgroup | None:
    """The cgroup's directory under `mount`, or the mount itself when the path is not visible
    there (a cgroup namespace, or the container's cgroup bind-mounted as the root)."""
    for directory in (mount / path.lstrip("/"), mount):
        if (directory / layout.usage_file).is_file():
            return MemoryCgroup(layout=layout, directory=directory, mount=mount)
    return None


def _read_int(path: Path) -> int | None:
    """An integer file; `max` (v2's "no limit") and unreadable files give None."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _read_keyed(path: Path) -> dict[str, int]:
    """A flat `key value` file (memory.stat, memory.events, memory.oom_control)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = [line.split() for line in lines]
    return {pair[0]: int(pair[1]) for pair in pairs if len(pair) > 1 and pair[1].isdigit()}
