"""`crawlstream gateway` as a child process for integration tests, and an HTTP client for it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING

import httpx
from ports import unused_port

if TYPE_CHECKING:
    from pathlib import Path

GATEWAY_START_DEADLINE_S = 60.0
"""From the process start to a ready job view (Kafka connection and the rebuild)."""


def free_port() -> int:
    """A port for a gateway or receiver the test starts (`ports.unused_port`)."""
    return unused_port()


class GatewayProcess:
    """One gateway replica on a port of its own, with its own log file."""

    def __init__(self, env: dict[str, str], log_path: Path, name: str) -> None:
        self.port = free_port()
        self.env = os.environ | env | {"CRAWL_WORKER_NAME": name}
        self.log_path = log_path
        self.name = name
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.log_file = self.log_path.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "service",
            "gateway",
            "--port",
            str(self.port),
            env=self.env | {"CRAWL_GATEWAY_HOST": "127.0.0.1"},
            stdout=self.log_file,
            stderr=self.log_file,
            start_new_session=True,
        )
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

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()

    async def close(self) -> None:
        await self.kill()
        self.log_file.close()


class DispatcherProcess:
    """`crawlstream webhooks` as a child process (ready once it logs `webhooks.started`)."""

    def __init__(self, env: dict[str, str], log_path: Path, name: str) -> None:
        self.env = os.environ | env | {"CRAWL_WORKER_NAME": name}
        self.log_path = log_path
        self.name = name
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.log_file = self.log_path.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "service",
            "webhooks",
            env=self.env,
            stdout=self.log_file,
            stderr=self.log_file,
            start_new_session=True,
        )
        async with asyncio.timeout(GATEWAY_START_DEADLINE_S):
            while "webhooks.started" not in self.log_path.read_text(errors="replace"):
                if self.process.returncode is not None:
                    raise AssertionError(f"{self.name} exited: {self.log_path.read_text()[-3000:]}")
                await asyncio.sleep(0.2)

    async def close(self) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()
        self.log_file.close()
