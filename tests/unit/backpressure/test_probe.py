"""The memory probe and sampler: fake cgroup v1/v2 and /proc trees, then the real machine."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from service.backpressure import LimitSource, MemoryProbe, MemorySampler, MemorySnapshot
from service.backpressure._proctree import ProcessTable, TreeMemory, process_memory, tree_pids
from service.errors import ConfigurationError

MIB = 1 << 20
KIB = 1024
WORKER = 100
V1_UNLIMITED = "9223372036854771712"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def add_process(proc: Path, pid: int, ppid: int, pss_kib: int | None, comm: str = "chrome") -> None:
    write(proc / str(pid) / "stat", f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 0\n")
    write(proc / str(pid) / "status", f"Name:\t{comm}\nVmRSS:\t{4 * (pss_kib or 1000)} kB\n")
    if pss_kib is not None:
        write(proc / str(pid) / "smaps_rollup", f"Rss: {4 * pss_kib} kB\nPss: {pss_kib} kB\n")


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    """A fake /proc: the worker (10 MiB), two Chromium children, a grandchild, a stranger."""
    root = tmp_path / "proc"
    write(root / "meminfo", f"MemTotal: {8192 * KIB} kB\nMemAvailable: {4096 * KIB} kB\n")
    add_process(root, WORKER, 1, 10 * KIB, comm="python (worker) x")
    add_process(root, 101, WORKER, 100 * KIB)
    add_process(root, 102, WORKER, 20 * KIB)
    add_process(root, 103, 101, None)  # no smaps_rollup: RSS (4 x 1000 KiB) instead
    add_process(root, 200, 1, 500 * KIB)
    return root


TREE_BYTES = (10 + 100 + 20) * MIB + 4000 * KIB


def probe(tmp_path: Path, proc: Path, **options: int) -> MemoryProbe:
    return MemoryProbe(
        root_pid=WORKER,
        proc_root=proc,
        cgroup_root=tmp_path / "cgroup",
        clock=lambda: 7.0,
        **options,
    )


def fake_v1(tmp_path: Path, proc: Path, limit: str, parent_limit: str = V1_UNLIMITED) -> None:
    """The worker in `/pod/worker` (300 MiB used, 100 MiB of it inactive file cache)."""
    write(proc / str(WORKER) / "cgroup", "9:pids:/\n4:memory:/pod/worker\n0::/\n")
    pod = tmp_path / "cgroup" / "memory" / "pod"
    write(pod / "memory.limit_in_bytes", parent_limit)
    write(pod / "worker" / "memory.limit_in_bytes", limit)
    write(pod / "worker" / "memory.usage_in_bytes", str(300 * MIB))
    stat = f"cache 1\ntotal_inactive_file {100 * MIB}\nhierarchical_memory_limit {V1_UNLIMITED}\n"
    write(pod / "worker" / "memory.stat", stat)
    write(pod / "worker" / "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")


def fake_v2(tmp_path: Path, proc: Path, limit: str, path: str = "/kubepods/worker") -> None:
    """The worker in `/kubepods/worker` (300 MiB used, 50 MiB of it inactive file cache)."""
    write(proc / str(WORKER) / "cgroup", f"0::{path}\n")
    cgroup = tmp_path / "cgroup" / "kubepods" / "worker"
    write(cgroup.parent / "memory.max", "max\n")
    write(cgroup / "memory.max", limit)
    write(cgroup / "memory.current", str(300 * MIB))
    write(cgroup / "memory.stat", f"anon 1\ninactive_file {50 * MIB}\nactive_file 9\n")
    write(cgroup / "memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")


def test_cgroup_v1_limit_and_working_set_without_inactive_file_cache(tmp_path, proc):
    """v1: the cgroup's limit applies and usage minus total_inactive_file is the working set."""
    fake_v1(tmp_path, proc, limit=str(512 * MIB))
    snapshot = probe(tmp_path, proc).sample()
    assert snapshot == MemorySnapshot(
        limit_bytes=512 * MIB,
        working_set_bytes=200 * MIB,
        tree_pss_bytes=TREE_BYTES,
        source=LimitSource.CGROUP_V1,
        taken_at=7.0,
        oom_kills=3,
        cgroup_level="own",
        cgroup_path="/pod/worker",
    )
    assert snapshot.used_bytes == 200 * MIB
    assert snapshot.headroom_bytes == 312 * MIB


def test_cgroup_v1_a_smaller_ancestor_limit_wins(tmp_path, proc):
    """The kernel enforces every ancestor's limit, so the smallest applies."""
    fake_v1(tmp_path, proc, limit=str(512 * MIB), parent_limit=str(256 * MIB))
    assert probe(tmp_path, proc).sample().limit_bytes == 256 * MIB


def v1_parent_usage(tmp_path: Path, used_mib: int, inactive_mib: int) -> None:
    """The v1 pod's (hierarchical) usage: the worker's cgroup plus its siblings'."""
    pod = tmp_path / "cgroup" / "memory" / "pod"
    write(pod / "memory.usage_in_bytes", str(used_mib * MIB))
    write(pod / "memory.stat", f"cache 1\ntotal_inactive_file {inactive_mib * MIB}\n")


def v2_parent_usage(tmp_path: Path, limit: str, used_mib: int, inactive_mib: int) -> None:
    """The v2 pod's limit and (hierarchical) usage."""
    pod = tmp_path / "cgroup" / "kubepods"
    write(pod / "memory.max", limit)
    write(pod / "memory.current", str(used_mib * MIB))
    write(pod / "memory.stat", f"anon 1\ninactive_file {inactive_mib * MIB}\n")


def test_cgroup_v1_a_parent_limit_is_judged_against_the_parents_usage(tmp_path, proc):
    """Issue 19: a pod limit of 1,228 MiB with a sidecar using 504 MiB in a sibling cgroup. The
    worker's own 200 MiB working set is not what the kernel weighs: the pod's 800 MiB is."""
    fake_v1(tmp_path, proc, limit=V1_UNLIMITED, parent_limit=str(1228 * MIB))
    v1_parent_usage(tmp_path, used_mib=904, inactive_mib=104)
    snapshot = probe(tmp_path, proc).sample()
    assert (snapshot.limit_bytes, snapshot.source) == (1228 * MIB, LimitSource.CGROUP_V1)
    assert (snapshot.used_bytes, snapshot.headroom_bytes) == (800 * MIB, 428 * MIB)
    assert (snapshot.bound_by, snapshot.cgroup_path) == ("parent", "/pod")


def test_cgroup_v2_a_parent_limit_is_judged_against_the_parents_usage(tmp_path, proc):
    """v2: the parent's memory.max is paired with its memory.current minus inactive_file."""
    fake_v2(tmp_path, proc, limit="max\n")
    v2_parent_usage(tmp_path, str(1228 * MIB), used_mib=900, inactive_mib=100)
    snapshot = probe(tmp_path, proc).sample()
    assert (snapshot.limit_bytes, snapshot.source) == (1228 * MIB, LimitSource.CGROUP_V2)
    assert (snapshot.used_bytes, snapshot.headroom_bytes) == (800 * MIB, 428 * MIB)
    assert (snapshot.bound_by, snapshot.cgroup_path) == ("parent", "/kubepods")


@pytest.mark.parametrize(
    ("own_mib", "pod_mib", "pod_used_mib", "bound_by", "headroom_mib"),
    [
        # the pod's limit is larger, but a sibling left it less room than the worker's own
        (1024, 2048, 1900, "parent", 148),
        # the worker's own limit is tighter than the pod's room
        (256, 2048, 900, "own", 6),
    ],
)
def test_cgroup_v2_the_level_with_least_headroom_wins(
    tmp_path, proc, own_mib, pod_mib, pod_used_mib, bound_by, headroom_mib
):
    """Not the smallest limit: the smallest limit minus usage, each level with its own usage."""
    fake_v2(tmp_path, proc, limit=str(own_mib * MIB))
    v2_parent_usage(tmp_path, str(pod_mib * MIB), used_mib=pod_used_mib, inactive_mib=0)
    snapshot = probe(tmp_path, proc).sample()
    assert snapshot.headroom_bytes == headroom_mib * MIB
    assert snapshot.bound_by == bound_by


def test_cgroup_v1_the_level_with_least_headroom_wins(tmp_path, proc):
    """v1: a 2 GiB pod with 1,900 MiB used binds before the worker's own 1 GiB with 200 MiB."""
    fake_v1(tmp_path, proc, limit=str(1024 * MIB), parent_limit=str(2048 * MIB))
    v1_parent_usage(tmp_path, used_mib=1900, inactive_mib=0)
    snapshot = probe(tmp_path, proc).sample()
    assert (snapshot.limit_bytes, snapshot.used_bytes) == (2048 * MIB, 1900 * MIB)
    assert snapshot.bound_by == "parent"


def test_unlimited_levels_are_ignored_whatever_they_use(tmp_path, proc):
    """The root and an unlimited pod hold the whole host's usage: neither is a limit."""
    fake_v2(tmp_path, proc, limit=str(1024 * MIB))
    v2_parent_usage(tmp_path, "max\n", used_mib=20_000, inactive_mib=0)
    write(tmp_path / "cgroup" / "memory.stat", f"inactive_file {MIB}\n")
    snapshot = probe(tmp_path, proc).sample()
    assert (snapshot.limit_bytes, snapshot.used_bytes) == (1024 * MIB, 250 * MIB)
    assert snapshot.bound_by == "own"


def test_cgroup_v1_grandparent_and_deeper_levels_are_named(tmp_path, proc):
    """Every ancestor up to the mount is read; the root's own limit counts too."""
    fake_v1(tmp_path, proc, limit=V1_UNLIMITED)
    root = tmp_path / "cgroup" / "memory"
    write(root / "memory.limit_in_bytes", str(900 * MIB))
    write(root / "memory.usage_in_bytes", str(800 * MIB))
    snapshot = probe(tmp_path, proc).sample()
    assert snapshot.headroom_bytes == 100 * MIB
    assert (snapshot.bound_by, snapshot.cgroup_path) == ("ancestor_2", "/")


def test_cgroup_v1_a_hidden_ancestors_limit_uses_the_topmost_visible_usage(tmp_path, proc):
    """In a cgroup namespace only `hierarchical_memory_limit` tells of the pod's limit; its
    usage is at least that of the topmost cgroup visible, which is what it is judged against."""
    fake_v1(tmp_path, proc, limit=str(2048 * MIB))
    v1_parent_usage(tmp_path, used_mib=700, inactive_mib=0)
    stat = tmp_path / "cgroup" / "memory" / "pod" / "worker" / "memory.stat"
    write(stat, f"total_inactive_file {100 * MIB}\nhierarchical_memory_limit {1024 * MIB}\n")
    snapshot = probe(tmp_path, proc).sample()
    assert (snapshot.limit_bytes, snapshot.used_bytes) == (1024 * MIB, 700 * MIB)
    assert snapshot.bound_by == "above_mount"


def test_a_configured_limit_competes_on_headroom_with_a_parent_limit(tmp_path, proc):
    """A 1 GiB budget for the tree (~134 MiB) leaves more room than a full pod: the pod binds."""
    fake_v1(tmp_path, proc, limit=V1_UNLIMITED, parent_limit=str(1228 * MIB))
    v1_parent_usage(tmp_path, used_mib=1100, inactive_mib=0)
    snapshot = probe(tmp_path, proc, configured_limit_bytes=1024 * MIB).sample()
    assert (snapshot.source, snapshot.headroom_bytes) == (LimitSource.CGROUP_V1, 128 * MIB)
    assert snapshot.bound_by == "parent"


def test_cgroup_v1_unlimited_falls_back_to_host_memory_and_the_process_tree(tmp_path, proc):
    """LONG_MAX rounded to a page means no limit: host MemTotal, judged against the tree PSS."""
    fake_v1(tmp_path, proc, limit=V1_UNLIMITED)
    snapshot = probe(tmp_path, proc).sample()
    assert (snapshot.limit_bytes, snapshot.source) == (8192 * MIB, LimitSource.HOST)
    assert snapshot.used_bytes == TREE_BYTES
    assert snapshot.oom_kills == 3


def test_cgroup_v2_limit_working_set_and_oom_kills(tmp_path, proc):
    """v2: memory.max, memory.current minus inactive_file, memory.events oom_kill."""
    fake_v2(tmp_path, proc, limit=f"{1024 * MIB}\n")
    snapshot = probe(tmp_path, proc).sample()
    assert (snapshot.limit_bytes, snapshot.source) == (1024 * MIB, LimitSource.CGROUP_V2)
    assert (snapshot.working_set_bytes, snapshot.oom_kills) == (250 * MIB, 2)


def test_cgroup_v2_max_means_unlimited(tmp_path, proc):
    """`max` everywhere: host memory applies, and the tree is what is judged."""
    fake_v2(tmp_path, proc, limit="max\n")
    snapshot = probe(tmp_path, proc).sample()
    assert snapshot.source is LimitSource.HOST
    assert snapshot.working_set_bytes == 250 * MIB
    assert snapshot.used_bytes == TREE_BYTES


def test_cgroup_v2_path_not_visible_reads_the_mounted_root(tmp_path, proc):
    """In a cgroup namespace the container's own cgroup is mounted as the root."""
    fake_v2(tmp_path, proc, limit=str(1024 * MIB))
    root = tmp_path / "cgroup"
    write(root / "memory.current", str(10 * MIB))
    write(root / "memory.max", str(64 * MIB))
    write(proc / str(WORKER) / "cgroup", "0::/somewhere/else\n")
    assert probe(tmp_path, proc).sample().limit_bytes == 64 * MIB


def test_hybrid_host_without_v2_memory_controller_uses_v1(tmp_path, proc):
    """A `0::/` line without v2 memory files falls through to the v1 `memory` line."""
    fake_v1(tmp_path, proc, limit=str(512 * MIB))
    assert probe(tmp_path, proc).sample().source is LimitSource.CGROUP_V1


def test_a_configured_limit_below_the_cgroup_limit_wins_and_the_tree_is_judged(tmp_path, proc):
    """The smaller limit applies; a configured budget is the worker tree's budget."""
    fake_v1(tmp_path, proc, limit=str(512 * MIB))
    snapshot = probe(tmp_path, proc, configured_limit_bytes=400 * MIB).sample()
    assert (snapshot.limit_bytes, snapshot.source) == (400 * MIB, LimitSource.CONFIGURED)
    assert snapshot.used_bytes == TREE_BYTES
    bigger = probe(tmp_path, proc, configured_limit_bytes=600 * MIB).sample()
    assert (bigger.limit_bytes, bigger.source) == (512 * MIB, LimitSource.CGROUP_V1)


def test_no_cgroup_and_no_setting_uses_host_memory(tmp_path, proc):
    """Without any cgroup file, host MemTotal is the limit."""
    snapshot = probe(tmp_path, proc).sample()
    assert (snapshot.limit_bytes, snapshot.source, snapshot.oom_kills) == (
        8192 * MIB,
        LimitSource.HOST,
        None,
    )
    assert snapshot.working_set_bytes == snapshot.tree_pss_bytes == TREE_BYTES


def test_no_limit_anywhere_is_a_configuration_error(tmp_path, proc):
    """Without cgroup, setting or meminfo the worker cannot budget memory."""
    (proc / "meminfo").unlink()
    with pytest.raises(ConfigurationError, match="CRAWL_MEMORY_LIMIT"):
        probe(tmp_path, proc).sample()


def test_the_process_tree_holds_descendants_only(proc):
    """Children and grandchildren count, unrelated processes do not."""
    assert sorted(tree_pids(proc, WORKER)) == [WORKER, 101, 102, 103]
    assert process_memory(proc, 103) == 4000 * KIB
    assert process_memory(proc, 999) == 0


def test_the_process_table_follows_births_deaths_and_new_parents(proc):
    """A table kept across looks sees what one fresh look sees: a new grandchild, a child that
    exited, and the children of an exited process under their new parent (a stranger here),
    without reading again the `stat` of processes it knows."""
    table = ProcessTable(proc)
    assert sorted(table.tree(WORKER)) == [WORKER, 101, 102, 103]
    add_process(proc, 104, 102, 1 * KIB)
    shutil.rmtree(proc / "101")
    add_process(proc, 103, 200, None)  # 101 exited: its child now belongs to 200
    (proc / "102" / "stat").write_text("unreadable")  # known: not read again
    assert sorted(table.tree(WORKER)) == [WORKER, 102, 104]
    assert sorted(table.tree(200)) == [103, 200]
    assert sorted(tree_pids(proc, 200)) == [103, 200]


def _grow_anonymous(proc: Path, pid: int, kib: int) -> None:
    write(proc / str(pid) / "status", f"Name:\tchrome\nVmRSS:\t{kib} kB\nRssAnon:\t{kib} kB\n")


def test_tree_memory_reads_pss_again_when_due_or_grown_by_a_share_of_the_headroom(proc):
    """Between PSS readings the figure stays the last reading; a new reading comes after
    `walk_s`, or once the tree's anonymous RSS grew by more than an eighth of the headroom
    (256 MiB at most), so near the limit every look reads PSS."""
    now = [0.0]
    tree = TreeMemory(proc, WORKER, walk_s=5.0, clock=lambda: now[0])
    assert tree.read(headroom_bytes=None) == TREE_BYTES
    add_process(proc, 104, 101, 2 * KIB)  # PSS 2 MiB, RSS 8 MiB: grown by 8 MiB
    now[0] = 1.0
    assert tree.read(headroom_bytes=8 * 100 * MIB) == TREE_BYTES  # 8 MiB < 100 MiB: stale
    assert tree.walks == 1
    now[0] = 2.0
    assert tree.read(headroom_bytes=8 * 4 * MIB) == TREE_BYTES + 2 * MIB  # 8 MiB >= 4 MiB
    _grow_anonymous(proc, 101, 4 * 100 * KIB + 200 * KIB)  # far from the limit: 200 MiB
    now[0] = 3.0
    assert tree.read(headroom_bytes=20 * 1024 * MIB) == TREE_BYTES + 2 * MIB
    _grow_anonymous(proc, 101, 4 * 100 * KIB + 300 * KIB)  # 300 MiB > 256 MiB: read again
    assert tree.read(headroom_bytes=20 * 1024 * MIB) == TREE_BYTES + 2 * MIB  # its PSS: same
    assert tree.walks == 3
    shutil.rmtree(proc / "102")
    now[0] = 8.0  # due
    assert tree.read(headroom_bytes=20 * 1024 * MIB) == TREE_BYTES + 2 * MIB - 20 * MIB
    assert tree.walks == 4


def test_snapshot_arithmetic_and_overload():
    """Headroom, utilization and the hard limit from one snapshot."""
    snapshot = MemorySnapshot(
        limit_bytes=1000,
        working_set_bytes=990,
        tree_pss_bytes=10,
        source=LimitSource.CGROUP_V2,
        taken_at=0.0,
    )
    assert (snapshot.headroom_bytes, snapshot.utilization) == (10, 0.99)
    assert snapshot.is_overloaded
    with pytest.raises(ValueError, match="positive"):
        MemorySnapshot(
            limit_bytes=0,
            working_set_bytes=0,
            tree_pss_bytes=0,
            source=LimitSource.HOST,
            taken_at=0,
        )


def test_the_real_machine_has_a_limit_and_a_working_set():
    """On this host the probe finds a positive limit, working set and tree PSS."""
    snapshot = MemoryProbe().sample()
    assert snapshot.limit_bytes > 0
    assert snapshot.working_set_bytes > 0
    assert snapshot.tree_pss_bytes > 0


@pytest.fixture
def sleeper():
    child = subprocess.Popen([shutil.which("sleep") or "sleep", "60"])
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def test_the_real_process_tree_includes_a_spawned_child(sleeper):
    """A child process is in the worker's tree, and its PSS is counted there.

    Exact equality is not asserted: a just-exec'd child still maps pages, and PSS shifts
    whenever another process maps or drops the same shared pages.
    """
    assert sleeper.pid in tree_pids(Path("/proc"), os.getpid())
    child_tree = MemoryProbe(root_pid=sleeper.pid).sample().tree_pss_bytes
    assert child_tree > 0
    assert MemoryProbe().sample().tree_pss_bytes > child_tree


@pytest.fixture
def v1_child_cgroup(sleeper):
    """A real v1 memory cgroup, limited to 256 MiB, holding the sleeper."""
    own = Path("/proc/self/cgroup").read_text()
    line = next((entry for entry in own.splitlines() if ":memory:" in entry), None)
    mount = Path("/sys/fs/cgroup/memory")
    if line is None or not os.access(mount, os.W_OK):
        pytest.skip("no writable cgroup v1 memory hierarchy")
    directory = mount / line.split(":", 2)[2].lstrip("/") / f"crawlstream-test-{os.getpid()}"
    directory.mkdir()
    try:
        (directory / "memory.limit_in_bytes").write_text(str(256 * MIB))
        (directory / "cgroup.procs").write_text(str(sleeper.pid))
        yield directory
    finally:
        sleeper.kill()
        sleeper.wait()
        directory.rmdir()


def test_a_real_v1_cgroup_limit_applies(sleeper, v1_child_cgroup):
    """The limit written to the process's real memory cgroup is the one the probe reports."""
    snapshot = MemoryProbe(root_pid=sleeper.pid).sample()
    assert (snapshot.limit_bytes, snapshot.source) == (256 * MIB, LimitSource.CGROUP_V1)
    assert snapshot.working_set_bytes < 256 * MIB  # pages stay charged where they were touched


async def test_the_sampler_has_a_snapshot_at_enter_and_feeds_the_listener(tmp_path, proc):
    """`latest` is set before the body runs; new snapshots reach the listener; exit stops it."""
    received: list[MemorySnapshot] = []
    three = asyncio.Event()

    def listener(snapshot: MemorySnapshot) -> None:
        received.append(snapshot)
        if len(received) == 3:
            three.set()

    tasks_before = len(asyncio.all_tasks())
    async with MemorySampler(probe(tmp_path, proc), interval=0, listener=listener) as sampler:
        assert sampler.latest.tree_pss_bytes == TREE_BYTES
        await three.wait()
    assert len(asyncio.all_tasks()) == tasks_before
    assert sampler.latest in received


def test_latest_outside_the_context_is_an_error(tmp_path, proc):
    """No snapshot leaks out as None."""
    with pytest.raises(RuntimeError, match="async with"):
        _ = MemorySampler(probe(tmp_path, proc)).latest


class _FlakyProbe(MemoryProbe):
    def __init__(self, inner: MemoryProbe) -> None:
        super().__init__()
        self._inner = inner
        self.calls = 0

    def sample(self) -> MemorySnapshot:
        self.calls += 1
        if self.calls == 2:
            raise OSError("cgroup file vanished")
        return self._inner.sample()


async def test_a_failed_sample_is_logged_and_sampling_goes_on(tmp_path, proc):
    """A read error keeps the last snapshot and the loop alive."""
    recovered = asyncio.Event()
    flaky = _FlakyProbe(probe(tmp_path, proc))
    with capture_logs() as logs:
        sampler = MemorySampler(flaky, interval=0, listener=lambda _: recovered.set())
        async with sampler:
            await recovered.wait()
    assert flaky.calls >= 3
    assert [entry["event"] for entry in logs] == ["memory.sample_failed"]
