"""Measure the worker's memory: `MemoryProbe` reads once, `MemorySampler` keeps reading.

The limit is the smaller of the cgroup's (v2 `memory.max`, v1 `memory.limit_in_bytes`, the
smallest over the visible ancestors) and the configured one; the host's `MemTotal` only when
neither applies. See `snapshot.py` for which usage figure is judged against it.
"""

from __future__ import annotations

import asyncio
import os
import time
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
"""Seconds between two walks of the process tree's PSS. Reading `smaps_rollup` makes the
kernel walk each Chromium process's page tables, which costs about 40 CPU ms per walk here;
the cgroup's counters, read on every sample, are cheap."""

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

    def sample(self) -> MemorySnapshot:
        cgroup = self._memory_cgroup
        reading = None if cgroup is None else cgroup.read()
        tree = self._tree_memory()
        limit, source = self._limit(reading)
        return MemorySnapshot(
            limit_bytes=limit,
            working_set_bytes=tree if reading is None else reading.working_set_bytes,
            tree_pss_bytes=tree,
            source=source,
            taken_at=self._clock(),
            oom_kills=None if reading is None else reading.oom_kills,
        )

    def _tree_memory(self) -> int:
        now = self._clock()
        if self._tree is None or now - self._tree[0] >= TREE_REFRESH_S:
            self._tree = (now, _proctree.tree_memory(self._proc_root, self._root_pid))
        return self._tree[1]

    @cached_property
    def _memory_cgroup(self) -> _cgroup.MemoryCgroup | None:
        proc_cgroup = self._proc_root / str(self._root_pid) / "cgroup"
        return _cgroup.locate(self._cgroup_root, proc_cgroup)

    def _limit(self, reading: _cgroup.CgroupReading | None) -> tuple[int, LimitSource]:
        """The smallest applicable limit; on a tie the cgroup's, since the kernel enforces it."""
        candidates: list[tuple[int, LimitSource]] = []
        if reading is not None and reading.limit_bytes is not None:
            candidates.append((reading.limit_bytes, _CGROUP_SOURCES[reading.version]))
        if self._configured is not None:
            candidates.append((self._configured, LimitSource.CONFIGURED))
        if candidates:
            return min(candidates, key=lambda candidate: candidate[0])
        host = _proctree.host_memory_total(self._proc_root)
        if host is None:
            raise ConfigurationError("no memory limit found: set CRAWL_MEMORY_LIMIT")
        return host, LimitSource.HOST


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
