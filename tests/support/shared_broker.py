"""One broker for every test process of a parallel run (`pytest -n N`).

The suite is bound by the two cores, not by its waits (measured: the cores are 99% busy from
start to end of `make test`). A broker per test process cost each process a JVM start
(27-31 s of the first test's setup on the busy machine) and a JVM's background work for the
whole run. The controlling process starts one broker before it spawns the test processes and
hands its address down in `KAFKA_BOOTSTRAP_SERVERS` (which the `kafka` fixture honours); every
test has topics and groups of its own, so the tests cannot see each other's messages. Tests
that stop, kill or configure a broker start their own, as before.

The broker runs in a thread with its own event loop, because pytest's hooks are synchronous.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Final

from harness import running_broker

if TYPE_CHECKING:
    import pytest

START_DEADLINE_S: Final = 300.0
"""A first start resolves the jars with Maven (57 s measured); later ones take seconds."""

STOP_DEADLINE_S: Final = 60.0

BOOTSTRAP_ENV: Final = "KAFKA_BOOTSTRAP_SERVERS"


class SharedBroker:
    """`start()` returns the bootstrap servers once the broker answers; `stop()` ends it."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._bootstrap: str | None = None
        self._error: BaseException | None = None

    def start(self) -> str:
        self._thread.start()
        if not self._ready.wait(START_DEADLINE_S):
            msg = f"the shared broker did not start within {START_DEADLINE_S:.0f} s"
            raise RuntimeError(msg)
        if self._bootstrap is None:
            msg = "the shared broker did not start"
            raise RuntimeError(msg) from self._error
        return self._bootstrap

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(STOP_DEADLINE_S)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            async with running_broker() as broker:
                self._bootstrap = broker.bootstrap_servers
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 (the thread's boundary: start() raises it)
            self._error = exc
        finally:
            self._ready.set()


def wanted(config: pytest.Config) -> bool:
    """This is the controller of a parallel run that may need a broker, and no cluster was
    given (a run of the unit tests alone, `make check`, needs none)."""
    return (
        not hasattr(config, "workerinput")
        and bool(getattr(config.option, "numprocesses", None))
        and not os.environ.get(BOOTSTRAP_ENV)
        and not _unit_tests_only(config.args)
    )


def _unit_tests_only(args: list[str]) -> bool:
    """Every path the run was given lies under `tests/unit`."""
    unit = (Path(__file__).parents[1] / "unit").resolve()
    paths = [Path(arg.split("::")[0]).resolve() for arg in args if not arg.startswith("-")]
    return bool(paths) and all(path == unit or unit in path.parents for path in paths)
