"""One reading of memory: the limit that applies, what is used against it, and the OOM count.

Which figure counts as *used* is decided here, once: when a cgroup limit applies it is the
working set (usage minus inactive file cache) of the cgroup whose limit it is, the worker's own
or an ancestor's (a pod's, whose usage includes its sidecars), because that is what the kernel
weighs before it OOM-kills; otherwise (a configured budget, or the host's memory) it is the
summed PSS of the worker and all its descendants, the memory this worker is responsible for.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

HARD_LIMIT_RATIO = 0.98
"""Share of the limit at which a snapshot counts as overloaded: the kernel is about to reclaim
hard or OOM-kill, and even the last in-flight page may be handed back."""


class LimitSource(StrEnum):
    """Where the applied memory limit came from."""

    CGROUP_V2 = "cgroup_v2"
    CGROUP_V1 = "cgroup_v1"
    CONFIGURED = "configured"
    HOST = "host"

    @property
    def is_cgroup(self) -> bool:
        return self in {LimitSource.CGROUP_V1, LimitSource.CGROUP_V2}


@dataclass(frozen=True, slots=True, kw_only=True)
class MemorySnapshot:
    """Memory as measured at `taken_at` (monotonic seconds)."""

    limit_bytes: int
    """The limit with the least headroom: a cgroup level's or the configured one; host memory
    when neither applies."""
    working_set_bytes: int
    """Usage minus inactive file cache of the cgroup whose limit applies (of the worker's own
    cgroup when no cgroup limit does); the process-tree figure when no cgroup."""
    tree_pss_bytes: int
    """PSS (RSS where PSS is unreadable) summed over the worker and all its descendants."""
    source: LimitSource
    """Which limit applied."""
    taken_at: float
    """`time.monotonic()` when the reading was taken."""
    oom_kills: int | None = None
    """The cgroup's OOM kill count, when the kernel exposes it."""
    cgroup_level: str | None = None
    """Which cgroup's limit applies: `own`, `parent`, `ancestor_N`, `above_mount`; None when
    the limit is not a cgroup's."""
    cgroup_path: str | None = None
    """That cgroup's path under its hierarchy's mount."""

    def __post_init__(self) -> None:
        if self.limit_bytes <= 0:
            raise ValueError(f"limit_bytes must be positive, got {self.limit_bytes}")

    @property
    def used_bytes(self) -> int:
        """What the limit is judged against (see the module docstring)."""
        return self.working_set_bytes if self.source.is_cgroup else self.tree_pss_bytes

    @property
    def bound_by(self) -> str:
        """What bounds the headroom, for logs and the metric label: the cgroup level, else the
        limit's source (`configured`, `host`)."""
        return self.cgroup_level or self.source.value

    @property
    def headroom_bytes(self) -> int:
        """Bytes left before the limit; negative when over it."""
        return self.limit_bytes - self.used_bytes

    @property
    def utilization(self) -> float:
        """Used share of the limit (may exceed 1.0)."""
        return self.used_bytes / self.limit_bytes

    @property
    def is_overloaded(self) -> bool:
        """At the hard limit: the kernel, not the governor, is about to decide."""
        return self.utilization >= HARD_LIMIT_RATIO
