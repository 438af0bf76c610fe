"""Fixtures of the gateway's integration tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from gateway import GatewayProcess, gateway_starter, running_gateway

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from pathlib import Path

    from harness import Topics


@pytest.fixture
async def start_gateway(
    topics: Topics, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[GatewayProcess]]]:
    """Starts `crawlstream gateway` replicas on this test's topics; all stopped afterwards."""
    async with gateway_starter(topics.env, tmp_path) as start:
        yield start


@pytest.fixture(scope="module")
async def shared_gateway(
    shared_topics: Topics, shared_worker: object, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[GatewayProcess]:
    """One default gateway replica in front of `shared_worker`, for the tests of a module that
    neither configure, restart nor stop their gateway (each tells its jobs apart by id)."""
    log = tmp_path_factory.mktemp("shared-gateway") / "shared-gateway.log"
    async with running_gateway(shared_topics.env(), log, "shared-gateway") as gateway:
        yield gateway
