"""Opt-in pytest plugin: the CPU each test costs, with everything it starts.

    make test PARALLEL="-n 4 --dist loadfile -p suite_cpu" SUITE_CPU_OUT=/tmp/cpu.tsv

Each test process of a parallel run moves itself into a cgroup v1 `cpuacct` group of its own,
so the processes it starts (workers, gateways, their Chromium, reparented or not) are
counted with it; the shared broker, started by the controller, is not. One line per test:
node id, wall seconds, CPU seconds, test process. It needs a writable cpuacct hierarchy
(root here); without one it records nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
OUT_ENV = "SUITE_CPU_OUT"
_GROUP = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None or not os.access(CPUACCT, os.W_OK):
        return
    group = CPUACCT / f"suite-cpu-{os.getpid()}"
    group.mkdir(exist_ok=True)
    (group / "cgroup.procs").write_text(str(os.getpid()))
    config.stash[_GROUP] = group


def pytest_unconfigure(config: pytest.Config) -> None:
    """Back to the root group; the test's own group goes once nothing it started is left."""
    group = config.stash.get(_GROUP, None)
    if group is not None:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        with contextlib.suppress(OSError):
            group.rmdir()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    group = item.config.stash.get(_GROUP, None)
    if group is None:
        yield
        return
    cpu, wall = _used(group), time.monotonic()
    yield
    cpu, wall = _used(group) - cpu, time.monotonic() - wall
    line = f"{item.nodeid}\t{wall:.2f}\t{cpu:.2f}\t{os.environ['PYTEST_XDIST_WORKER']}\n"
    with Path(os.environ.get(OUT_ENV, "suite-cpu.tsv")).open("a") as out:
        out.write(line)


def _used(group: Path) -> float:
    """CPU seconds of every process in `group` so far."""
    return int((group / "cpuacct.usage").read_text()) / 1e9
