"""Fixtures of the gateway's integration tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from gateway import GatewayProcess

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from harness import Topics


@pytest.fixture
async def start_gateway(
    topics: Topics, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[GatewayProcess]]]:
    """Starts `crawlstream gateway` replicas on this test's topics; all stopped afterwards."""
    started: list[GatewayProcess] = []

    async def start(name: str = "g1", **env: str) -> GatewayProcess:
        gateway = GatewayProcess(topics.env(**env), tmp_path / f"{name}.log", name)
        started.append(gateway)
        await gateway.start()
        return gateway

    yield start
    for gateway in started:
        await gateway.close()


@pytest.fixture(scope="module")
async def shared_gateway(
    shared_topics: Topics, shared_worker: object, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayProcess]:
    """One default gateway replica in front of `shared_worker`, for the tests of a module that
    neither configure, restart nor stop their gateway (each tells its jobs apart by id)."""
    log = tmp_path_factory.mktemp("shared-gateway") / "shared-gateway.log"
    gateway = GatewayProcess(shared_topics.env(), log, "shared-gateway")
    try:
        await gateway.start()
        yield gateway
    finally:
        await gateway.close()
