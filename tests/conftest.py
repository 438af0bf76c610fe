"""Shared fixtures: the real broker (session), the local test sites, per-test topics."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from graphsite import serve_graph
from harness import (
    STARTED,
    Collector,
    Topics,
    WorkerProcess,
    collecting,
    running_broker,
    wait_for_leaders,
)
from shared_broker import BOOTSTRAP_ENV, SharedBroker, wanted
from testsite import serve

from service.messaging.topics import ensure_topics

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
    from pathlib import Path

    from graphsite import GraphSite
    from testsite import TestSite


def pytest_configure(config: pytest.Config) -> None:
    """A parallel run's controller starts the one broker its test processes share."""
    if wanted(config):
        broker = SharedBroker()
        os.environ[BOOTSTRAP_ENV] = broker.start()
        config.stash[_SHARED_BROKER] = broker


def pytest_unconfigure(config: pytest.Config) -> None:
    broker = config.stash.get(_SHARED_BROKER, None)
    if broker is not None:
        broker.stop()
        os.environ.pop(BOOTSTRAP_ENV, None)


_SHARED_BROKER = pytest.StashKey[SharedBroker]()
_STARTED_AT = pytest.StashKey[float]()


def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_STARTED_AT] = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test's report carries the log tails of the `crawlstream` processes that
    wrote while it ran (its own and its module's), and where each running worker's tasks
    wait, so a CI failure says what they did and what they wait for."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed or call.when == "teardown":
        return
    since = item.stash.get(_STARTED_AT, 0.0)
    for process in STARTED:
        tail = process.tail_since(since)
        if tail:
            report.sections.append((f"log of {process.name} ({process.log_path})", tail))
            tasks = process.tasks_now()
            if tasks:
                report.sections.append((f"where the tasks of {process.name} wait", tasks))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`long_running` tests first, the rest in their order: `make test` hands whole modules
    to its test processes in this order, so the longest go out first and the short ones
    fill in around their waits."""
    items.sort(key=lambda item: item.get_closest_marker("long_running") is None)


@pytest.fixture(scope="session")
async def kafka() -> AsyncIterator[str]:
    """Bootstrap servers of a real broker: `KAFKA_BOOTSTRAP_SERVERS`, else one started here."""
    existing = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if existing:
        yield existing
        return
    async with running_broker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture(scope="session")
async def site() -> AsyncIterator[TestSite]:
    async with serve() as running:
        yield running


@pytest.fixture(scope="session")
async def other_site() -> AsyncIterator[TestSite]:
    """The test site again on another host, 127.0.0.2: a second host for politeness,
    isolation and what `auto` learns per host name (a module's worker learns on its own)."""
    async with serve("127.0.0.2") as running:
        yield running


@pytest.fixture(scope="session")
async def graph_site() -> AsyncIterator[GraphSite]:
    """The generated site with a known link graph, for deep crawls (see `reference_crawl`)."""
    async with serve_graph() as running:
        yield running


async def _new_topics(kafka: str, site: TestSite) -> Topics:
    made = Topics(bootstrap=kafka, extra_env={"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site.port}"})
    await ensure_topics(made.settings())
    await wait_for_leaders(made)
    return made


@pytest.fixture
async def topics(kafka: str, site: TestSite) -> Topics:
    """Topics and a group of this test's own; the test site is allowlisted."""
    return await _new_topics(kafka, site)


@pytest.fixture
async def collector(topics: Topics) -> AsyncIterator[object]:
    async with collecting(topics) as running:
        yield running


@pytest.fixture
async def start_worker(
    topics: Topics, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[WorkerProcess]]]:
    """Starts `crawlstream worker` processes for this test; all are stopped afterwards."""
    started: list[WorkerProcess] = []

    async def start(
        name: str = "w1", preexec: Callable[[], None] | None = None, **env: str
    ) -> WorkerProcess:
        worker = WorkerProcess(topics.env(**env), tmp_path / f"{name}.log", name, preexec)
        started.append(worker)
        await worker.start()
        return worker

    yield start
    for worker in started:
        await worker.close()


@pytest.fixture(scope="module")
async def shared_topics(kafka: str, site: TestSite) -> Topics:
    """Topics and a group that the tests of one module share with `shared_worker`."""
    return await _new_topics(kafka, site)


@dataclass(frozen=True)
class SharedRun:
    """A running worker with its own topics, group and collector, shared by a module's tests."""

    topics: Topics
    collector: Collector
    worker: WorkerProcess


@pytest.fixture(scope="module")
async def shared_worker_with(
    kafka: str, site: TestSite, shared_topics: Topics, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Callable[..., Awaitable[SharedRun]]]:
    """A worker for each set of settings the tests of a module ask for, on topics and a group
    of its own (the default settings on `shared_topics`): the first test that asks for a set
    starts it, the others get the same one (one start per set instead of one per test). For
    tests that neither restart nor kill it and tell their work apart by request id; all are
    stopped after the module."""
    running: dict[tuple[tuple[str, str], ...], SharedRun] = {}
    logs = tmp_path_factory.mktemp("shared-with")
    async with contextlib.AsyncExitStack() as stack:

        async def start(**env: str) -> SharedRun:
            key = tuple(sorted(env.items()))
            if key not in running:
                name = f"shared-{len(running) + 1}"
                topics = await _new_topics(kafka, site) if env else shared_topics
                collector = await stack.enter_async_context(collecting(topics))
                worker = WorkerProcess(topics.env(**env), logs / f"{name}.log", name)
                stack.push_async_callback(worker.close)
                await worker.start()
                running[key] = SharedRun(topics, collector, worker)
            return running[key]

        yield start


@pytest.fixture(scope="module")
async def shared_run(shared_worker_with: Callable[..., Awaitable[SharedRun]]) -> SharedRun:
    """The module's default worker on `shared_topics` (`shared_worker_with()`), for the tests
    that neither configure, restart nor kill their worker (each tells its own work apart by
    request id): one start instead of one per test."""
    return await shared_worker_with()


@pytest.fixture(scope="module")
def shared_worker(shared_run: SharedRun) -> WorkerProcess:
    return shared_run.worker


@pytest.fixture(scope="module")
def shared_collector(shared_run: SharedRun) -> Collector:
    """What `shared_worker` published on `shared_topics`."""
    return shared_run.collector
