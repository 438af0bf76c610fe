"""`crawlstream gateway` as a child process for integration tests, and an HTTP client for it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import httpx
from harness import WorkerProcess
from ports import unused_port

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

GATEWAY_START_DEADLINE_S = 60.0
"""From the process start to a ready job view (Kafka connection and the rebuild)."""


def free_port() -> int:
    """A port for a gateway or receiver the test starts (`ports.unused_port`)."""
    return unused_port()


class GatewayProcess(WorkerProcess):
    """One gateway replica on a port of its own, with its own log file; ready once its
    `/readyz` answers 200."""

    def __init__(self, env: dict[str, str], log_path: Path, name: str) -> None:
        self.port = free_port()
        super().__init__(
            env | {"CRAWL_GATEWAY_HOST": "127.0.0.1"},
            log_path,
            name,
            command=("gateway", "--port", str(self.port)),
            ready_event=None,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        await super().start()
        await self.wait_ready(GATEWAY_START_DEADLINE_S)

    async def wait_ready(self, deadline_s: float) -> None:
        async with asyncio.timeout(deadline_s), httpx.AsyncClient(timeout=5) as client:
            while True:
                if self.process is not None and self.process.returncode is not None:
                    raise AssertionError(f"{self.name} exited: {self.log_path.read_text()[-3000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.url}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def running_gateway(
    env: dict[str, str], log_path: Path, name: str
) -> AsyncIterator[GatewayProcess]:
    """One replica, ready on entry and stopped on exit (a module's shared one, say)."""
    gateway = GatewayProcess(env, log_path, name)
    try:
        await gateway.start()
        yield gateway
    finally:
        await gateway.close()


@contextlib.asynccontextmanager
async def gateway_starter(
    env: Callable[..., dict[str, str]], folder: Path
) -> AsyncIterator[Callable[..., Awaitable[GatewayProcess]]]:
    """`start(name="g1", **settings)` starts a replica with `env(**settings)` and its log in
    `folder`; every replica it started is stopped on exit."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(name: str = "g1", **settings: str) -> GatewayProcess:
            replica = running_gateway(env(**settings), folder / f"{name}.log", name)
            return await stack.enter_async_context(replica)

        yield start


class DispatcherProcess(WorkerProcess):
    """`crawlstream webhooks` as a child process (ready once it logs `webhooks.started`)."""

    def __init__(self, env: dict[str, str], log_path: Path, name: str) -> None:
        super().__init__(env, log_path, name, command=("webhooks",), ready_event="webhooks.started")
