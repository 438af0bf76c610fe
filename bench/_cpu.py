"""CPU time of process trees by role (worker, Playwright's driver, Chromium, broker), from /proc.

Every process of the watched trees is sampled every `INTERVAL_S`; a process's share is its last
`utime + stime` minus the first value seen (0 for a process born while watching). A process
that exits loses at most its last interval, so the figures are a slight undercount.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from service.backpressure._proctree import ProcessTable

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

INTERVAL_S = 0.2
TICKS = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


def _cpu_s(pid: int) -> tuple[str, float] | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    return name, (int(fields[11]) + int(fields[12])) / TICKS


def role(name: str, pid: int, roots: dict[int, str]) -> str:
    if pid in roots:
        return roots[pid]
    if name.startswith("node"):
        return "driver (node)"
    if "chrom" in name:
        return "chromium"
    return "other"


class CpuAccount:
    """`async with CpuAccount({pid: role}).running() as cpu:` then `cpu.by_role()` in seconds.

    Each root is watched with its descendants; a root in `alone` without them."""

    def __init__(self, roots: dict[int, str], *, alone: frozenset[int] = frozenset()) -> None:
        self.roots = roots
        self.alone = alone
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._role: dict[int, str] = {}
        self._root: dict[int, int] = {}
        self._started = False
        self._table = ProcessTable(PROC)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[CpuAccount]:
        self.sample()
        self._started = True
        task = asyncio.create_task(self._loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.sample()

    def sample(self) -> None:
        for root in self.roots:
            for pid in [root] if root in self.alone else self._table.tree(root):
                found = _cpu_s(pid)
                if found is None:
                    continue
                name, seconds = found
                if pid not in self._first:
                    self._first[pid] = seconds if not self._started else 0.0
                    self._role[pid] = role(name, pid, self.roots)
                    self._root[pid] = root
                self._last[pid] = seconds

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            await asyncio.to_thread(self.sample)

    def by_role(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for pid, last in self._last.items():
            key = self._role[pid]
            totals[key] = totals.get(key, 0.0) + last - self._first[pid]
        return totals

    def by_root(self) -> dict[int, float]:
        """Seconds of each root's tree."""
        totals = dict.fromkeys(self.roots, 0.0)
        for pid, last in self._last.items():
            totals[self._root[pid]] += last - self._first[pid]
        return totals


def cpu_lines(label: str, totals: dict[str, float], pages: int) -> list[str]:
    """One line per role: CPU-ms per page, and the total."""
    lines = [f"CPU-ms per page, {label}:"]
    for key, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        lines.append(f"  {key:<20}{seconds * 1000 / pages:>8.1f}")
    lines.append(f"  {'total':<20}{sum(totals.values()) * 1000 / pages:>8.1f}")
    return lines
