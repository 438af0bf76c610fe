"""Measure the worker's memory: `MemoryProbe` reads once, `MemorySampler` keeps reading.

Each limit is paired with the usage it is enforced against: every limited cgroup level (v2
`memory.max`, v1 `memory.limit_in_bytes`, the worker's own cgroup and each ancestor) with that
level's working set, the configured limit with the worker's process tree. The one with the
least headroom applies (a cgroup level on a tie, since the kernel enforces it); the host's
`MemTotal` only when none applies. See `snapshot.py` for which usage figure is judged.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self

import structlog

from service.backpressure import _cgroup, _proctree
from service.backpressure.snapshot import LimitSource, MemorySnapshot
from service.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import timedelta
    from types import TracebackType

__all__ = ["LimitSource", "MemoryProbe", "MemorySampler", "MemorySnapshot"]

SAMPLE_INTERVAL_S = 0.25
"""Seconds between two samples: well under the time a page takes to grow by its cost."""

TREE_REFRESH_S = 1.0
"""Seconds between two looks at the process tree's memory (`_proctree.TreeMemory`: its PSS
is read again when it may have grown enough to matter); the cgroup's counters, read on
every sample, are cheap."""

CGROUP_ROOT = Path("/sys/fs/cgroup")
"""Where the cgroup hierarchies are mounted."""

PROC_ROOT = Path("/proc")
"""Where the kernel's process information is mounted."""

_CGROUP_SOURCES = {2: LimitSource.CGROUP_V2, 1: LimitSource.CGROUP_V1}

logger = structlog.get_logger(__name__)


class SamplerSettings(Protocol):
    """The settings fields the sampler is built from."""

    @property
    def memory_limit(self) -> int | None: ...
    @property
    def memory_sample_interval(self) -> timedelta: ...


class MemoryProbe:
    """Takes snapshots of one worker's memory. Reads files: call it from a thread."""

    def __init__(
        self,
        *,
        configured_limit_bytes: int | None = None,
        root_pid: int | None = None,
        cgroup_root: Path = CGROUP_ROOT,
        proc_root: Path = PROC_ROOT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if configured_limit_bytes is not None and configured_limit_bytes <= 0:
            raise ConfigurationError(f"memory limit must be positive: {configured_limit_bytes}")
        self._configured = configured_limit_bytes
        self._root_pid = os.getpid() if root_pid is None else root_pid
        self._cgroup_root = cgroup_root
        self._proc_root = proc_root
        self._clock = clock
        self._tree: tuple[float, int] | None = None
        self._tree_reader = _proctree.TreeMemory(proc_root, self._root_pid, clock=clock)
        self._headroom: int | None = None
        """The last snapshot's headroom: how much growth the tree's reading may lag by."""

    def sample(self) -> MemorySnapshot:
        cgroup = self._memory_cgroup
        reading = None if cgroup is None else cgroup.read()
        tree = self._tree_memory()
        budget = self._budget(reading, tree)
        self._headroom = budget.headroom_bytes
        return MemorySnapshot(
            limit_bytes=budget.limit_bytes,
            working_set_bytes=budget.working_set_bytes,
            tree_pss_bytes=tree,
            source=budget.source,
            taken_at=self._clock(),
            oom_kills=None if reading is None else reading.oom_kills,
            cgroup_level=budget.cgroup_level,
            cgroup_path=budget.cgroup_path,
        )

    def _tree_memory(self) -> int:
        now = self._clock()
        if self._tree is None or now - self._tree[0] >= TREE_REFRESH_S:
            self._tree = (now, self._tree_reader.read(self._headroom))
        return self._tree[1]

    @cached_property
    def _memory_cgroup(self) -> _cgroup.MemoryCgroup | None:
        proc_cgroup = self._proc_root / str(self._root_pid) / "cgroup"
        return _cgroup.locate(self._cgroup_root, proc_cgroup)

    def _budget(self, reading: _cgroup.CgroupReading | None, tree: int) -> _Budget:
        """The limit with the least headroom; on a tie the cgroup's, since the kernel enforces
        it; the host's memory when no limit applies."""
        own = tree if reading is None else reading.working_set_bytes
        candidates = (
            [] if reading is None else [_level_budget(reading, lvl) for lvl in reading.levels]
        )
        if self._configured is not None:
            candidates.append(
                _Budget(
                    limit_bytes=self._configured,
                    used_bytes=tree,
                    working_set_bytes=own,
                    source=LimitSource.CONFIGURED,
                )
            )
        if candidates:
            return min(candidates, key=lambda candidate: candidate.headroom_bytes)
        host = _proctree.host_memory_total(self._proc_root)
        if host is None:
            raise ConfigurationError("no memory limit found: set CRAWL_MEMORY_LIMIT")
        return _Budget(
            limit_bytes=host, used_bytes=tree, working_set_bytes=own, source=LimitSource.HOST
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Budget:
    """One limit and the usage the probe judges against it."""

    limit_bytes: int
    used_bytes: int
    working_set_bytes: int
    source: LimitSource
    cgroup_level: str | None = None
    cgroup_path: str | None = None

    @property
    def headroom_bytes(self) -> int:
        return self.limit_bytes - self.used_bytes


def _level_budget(reading: _cgroup.CgroupReading, level: _cgroup.LevelReading) -> _Budget:
    """One limited cgroup level, judged against its own working set."""
    return _Budget(
        limit_bytes=level.limit_bytes,
        used_bytes=level.working_set_bytes,
        working_set_bytes=level.working_set_bytes,
        source=_CGROUP_SOURCES[reading.version],
        cgroup_level=level.name,
        cgroup_path=level.path,
    )


class MemorySampler:
    """Samples memory every `interval` seconds in a background task while entered.

    `latest` is the newest snapshot (a plain attribute read); `listener`, if given, is called
    with each new snapshot on the event loop. File reading happens in a worker thread.
    """

    def __init__(
        self,
        probe: MemoryProbe,
        *,
        interval: float = SAMPLE_INTERVAL_S,
        listener: Callable[[MemorySnapshot], None] | None = None,
    ) -> None:
        self._probe = probe
        self._interval = interval
        self._listener = listener
        self._latest: MemorySnapshot | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_settings(
        cls,
        settings: SamplerSettings,
        *,
        listener: Callable[[MemorySnapshot], None] | None = None,
    ) -> Self:
        probe = MemoryProbe(configured_limit_bytes=settings.memory_limit)
        interval = settings.memory_sample_interval.total_seconds()
        return cls(probe, interval=interval, listener=listener)

    def listen(self, listener: Callable[[MemorySnapshot], None]) -> None:
        """Hand each snapshot after this one to `listener` (one built from `latest`)."""
        self._listener = listener

    @property
    def latest(self) -> MemorySnapshot:
        if self._latest is None:
            raise RuntimeError("MemorySampler.latest read outside `async with`")
        return self._latest

    async def __aenter__(self) -> Self:
        self._latest = await asyncio.to_thread(self._probe.sample)
        self._task = asyncio.create_task(self._run(), name="memory-sampler")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})  # unlike `await task`, never swallows our own cancel

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self._sample_once()
            except Exception:  # loop boundary: keep the last snapshot and try again
                logger.exception("memory.sample_failed")

    async def _sample_once(self) -> None:
        snapshot = await asyncio.to_thread(self._probe.sample)
        self._latest = snapshot
        if self._listener is not None:
            self._listener(snapshot)
