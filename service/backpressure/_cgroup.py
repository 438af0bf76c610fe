"""Read a process's memory cgroup (v2 or v1): every limited level, its working set, OOM kills.

The kernel enforces the limit of the process's own cgroup and of every ancestor, each against
the usage of that ancestor's whole subtree (a sidecar in a sibling cgroup counts against the
pod's limit). So each level's limit is paired with that level's working set, and the level
with the least headroom is the one that binds.

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

ABOVE_MOUNT = "above_mount"
"""Name of a v1 ancestor that is not visible under the mount (a cgroup namespace), known only
from `hierarchical_memory_limit`."""


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
class LevelReading:
    """One limited cgroup of the process's lineage: its limit and the working set charged to it."""

    name: str
    """`own` (the process's cgroup), `parent`, `ancestor_N` (N levels up), or `above_mount`."""
    path: str
    """The cgroup's path under the hierarchy's mount (`/` for the mount itself); empty for
    `above_mount`."""
    limit_bytes: int
    working_set_bytes: int
    """Usage of the cgroup's whole subtree minus its inactive file cache."""

    @property
    def headroom_bytes(self) -> int:
        return self.limit_bytes - self.working_set_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class CgroupReading:
    """One read of the cgroup files that matter for memory."""

    version: int
    working_set_bytes: int
    """The process's own cgroup: usage minus inactive file cache (the kernel reclaims that
    before it OOM-kills)."""
    levels: tuple[LevelReading, ...]
    """Every level with a limit, the process's own cgroup first; unlimited levels are left out."""
    oom_kills: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Usage:
    """What one directory of the lineage reports."""

    directory: Path
    limit_bytes: int | None
    working_set_bytes: int | None
    stat: dict[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryCgroup:
    """Where a process's memory cgroup lives, and how to read it."""

    layout: _Layout
    directory: Path
    mount: Path

    def read(self) -> CgroupReading | None:
        lineage = [self._usage(directory) for directory in self._lineage()]
        own = lineage[0].working_set_bytes
        if own is None:
            return None
        return CgroupReading(
            version=self.layout.version,
            working_set_bytes=own,
            levels=self._levels(lineage, own),
            oom_kills=_read_keyed(self.directory / self.layout.oom_file).get("oom_kill"),
        )

    def _usage(self, directory: Path) -> _Usage:
        usage = _read_int(directory / self.layout.usage_file)
        stat = _read_keyed(directory / "memory.stat") if usage is not None else {}
        inactive = stat.get(self.layout.inactive_key, 0)
        return _Usage(
            directory=directory,
            limit_bytes=_bounded(_read_int(directory / self.layout.limit_file)),
            working_set_bytes=None if usage is None else max(usage - inactive, 0),
            stat=stat,
        )

    def _levels(self, lineage: list[_Usage], own: int) -> tuple[LevelReading, ...]:
        """Each limited level with its working set; a level whose usage is unreadable gets the
        largest one read below it (its subtree uses at least that)."""
        levels: list[LevelReading] = []
        below = own
        for depth, usage in enumerate(lineage):
            below = max(below, usage.working_set_bytes or 0)
            if usage.limit_bytes is not None:
                level = LevelReading(
                    name=_level_name(depth),
                    path=_path_under(self.mount, usage.directory),
                    limit_bytes=usage.limit_bytes,
                    working_set_bytes=below,
                )
                levels.append(level)
        hidden = self._hidden_limit(lineage[0].stat, levels)
        if hidden is not None:
            levels.append(
                LevelReading(name=ABOVE_MOUNT, path="", limit_bytes=hidden, working_set_bytes=below)
            )
        return tuple(levels)

    @staticmethod
    def _hidden_limit(stat: dict[str, int], levels: list[LevelReading]) -> int | None:
        """v1's `hierarchical_memory_limit` when it is below every visible limit: then it
        belongs to an ancestor above the mount, whose usage cannot be read."""
        hierarchical = _bounded(stat.get("hierarchical_memory_limit"))
        visible = min((level.limit_bytes for level in levels), default=None)
        if hierarchical is None or (visible is not None and hierarchical >= visible):
            return None
        return hierarchical

    def _lineage(self) -> list[Path]:
        """The cgroup directory and its ancestors up to the hierarchy's mount."""
        lineage = [self.directory]
        while self.mount in lineage[-1].parents:
            lineage.append(lineage[-1].parent)
        return lineage


def _level_name(depth: int) -> str:
    """0 -> `own`, 1 -> `parent`, N -> `ancestor_N`."""
    return {0: "own", 1: "parent"}.get(depth, f"ancestor_{depth}")


def _path_under(mount: Path, directory: Path) -> str:
    """`directory` as a cgroup path: `/` for the mount, `/a/b` below it."""
    relative = directory.relative_to(mount).as_posix()
    return "/" if relative == "." else f"/{relative}"


def _bounded(limit: int | None) -> int | None:
    """A limit, or None when it means "no limit"."""
    return limit if limit is not None and limit < UNLIMITED_THRESHOLD else None


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
