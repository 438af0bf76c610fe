"""Content work in child processes: answers, exceptions, the budget, a dead child."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Final

import pytest

from service.content.offload import (
    LONG_CALL_S,
    ContentBudgetError,
    ContentFailedError,
    ContentPool,
    _Child,
    offloaded,
    using,
)
from service.content.pdf import PdfUnreadableError, read_pdf


async def test_a_call_runs_in_a_child_and_its_exception_comes_back() -> None:
    async with ContentPool(processes=1, budget_s=20) as pool:
        assert await pool.run(os.getpid) != os.getpid()
        with pytest.raises(PdfUnreadableError):
            await pool.run(read_pdf, b"not a pdf", 1)


async def test_work_past_the_budget_kills_the_child_and_the_pool_goes_on() -> None:
    async with ContentPool(processes=1, budget_s=0.5) as pool:
        first = await pool.run(os.getpid)
        with pytest.raises(ContentBudgetError):
            await pool.run(time.sleep, 30)
        assert pool.killed == 1
        assert await pool.run(os.getpid) != first


async def test_a_child_that_dies_fails_its_call_and_is_replaced() -> None:
    async with ContentPool(processes=1, budget_s=20) as pool:
        pid = await pool.run(os.getpid)
        with pytest.raises(ContentFailedError):
            await pool.run(os.kill, pid, signal.SIGKILL)
        assert await pool.run(os.getpid) != pid


async def test_offloaded_uses_the_installed_pool_else_a_thread() -> None:
    assert await offloaded(os.getpid) == os.getpid()
    async with ContentPool(processes=1, budget_s=20) as pool:
        with using(pool):
            assert await offloaded(os.getpid) != os.getpid()


async def test_a_long_call_sinks_its_child_which_is_replaced_after() -> None:
    """A call past `LONG_CALL_S` runs on at the lowest priority; its child is then retired."""
    async with ContentPool(processes=1, budget_s=20) as pool:
        first = await pool.run(os.getpid)
        await pool.run(time.sleep, LONG_CALL_S + 0.5)
        assert await pool.run(os.getpid) != first


async def test_children_are_forked_by_one_template_and_all_end_with_the_pool() -> None:
    """A replacement child comes from the same template (its imports are not paid again), and
    closing the pool ends the children and the template."""
    async with ContentPool(processes=1, budget_s=0.5) as pool:
        first, template = await pool.run(os.getpid), await pool.run(os.getppid)
        with pytest.raises(ContentBudgetError):
            await pool.run(time.sleep, 30)
        second, second_template = await pool.run(os.getpid), await pool.run(os.getppid)
    assert template != os.getpid()
    assert (second != first, second_template) == (True, template)
    for pid in (first, second, template):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_child_gone_is_never_signalled_by_a_pid_another_process_took() -> None:
    """The template reaps its children, so a dead child's pid is free for any new process
    (pids wrap at 32,768 here): the worker signals the child it knew, never a number."""
    ours, theirs = socket.socketpair()
    gone = subprocess.Popen(["sleep", "60"])  # noqa: S607 - a stand-in content process
    child = _Child(sock=ours)
    child.known(gone.pid)
    gone.kill()
    gone.wait()
    taker = subprocess.Popen(["sleep", "60"])  # noqa: S607 - the process that took its pid
    try:
        child.pid = taker.pid  # the number now names another process
        child.sink()
        child.kill()
        assert taker.poll() is None
        assert os.getpriority(os.PRIO_PROCESS, taker.pid) == os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        taker.kill()
        taker.wait()
        theirs.close()


async def test_the_content_processes_start_without_rich() -> None:
    """structlog imports rich whenever it can (a quarter of a content process's start); they
    never print to a terminal, so they start without it."""
    async with ContentPool(processes=1, budget_s=20) as pool:
        loaded = await pool.run(eval, "[m for m in __import__('sys').modules if 'rich' in m]")
        assert loaded == ["rich"]  # the entry that stops its import, nothing else
        assert await pool.run(eval, "__import__('structlog').dev.rich") is None


RESERVING: Final = """
import asyncio, json, os, sys, threading
from service.content import offload, template

def described(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        program = f.read().split(b"\\0")[1:-1]
    with open(f"/proc/{pid}/stat") as f:
        parent = int(f.read().rsplit(")", 1)[1].split()[1])
    return {"pid": pid, "parent": parent, "program": [part.decode() for part in program]}

async def main():
    async with offload.ContentPool(processes=1, budget_s=20) as pool:
        template = described(await pool.run(os.getppid))
    template["ended"] = not os.path.exists(f"/proc/{template['pid']}")
    return {"self": os.getpid(), "template": template}

mode = sys.argv[1]
if mode == "threads":
    threading.Thread(target=threading.Event().wait, daemon=True).start()
template.reserve_template()
if mode == "died":
    offload._reserved[0].process.kill()
    offload._reserved[0].process.wait(5)  # reaped: the pool sees it gone
print(json.dumps(asyncio.run(main())))
"""


def _template_of(mode: str) -> dict[str, Any]:
    """The content template of a pool in a process that called `reserve_template`."""
    done = subprocess.run(
        [sys.executable, "-c", RESERVING, mode], capture_output=True, check=True, timeout=60
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    template: dict[str, Any] = answer["template"]
    assert template["parent"] == answer["self"]
    assert template["ended"]
    return template


def test_a_worker_forks_its_content_template_before_its_event_loop() -> None:
    """`reserve_template` forks the template from the process while it runs one thread: it
    runs the process's own program, not an interpreter started anew (whose imports cost
    0.5 CPU s a worker start), and ends with the pool."""
    assert _template_of("one thread")["program"] == ["-c", RESERVING, "one thread"]


def test_a_template_is_started_anew_when_threads_run_or_the_reserved_one_died() -> None:
    """With threads running a fork could copy a lock another thread holds: the pool starts
    its template with exec, as it does when the reserved one died before the pool took it."""
    for mode in ("threads", "died"):
        program = _template_of(mode)["program"]
        assert program[0] == "-c"
        assert "service.content._child" in program[1]
