"""`/metrics`, `/healthz` and `/readyz` on the metrics port."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Self

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import TracebackType

    from prometheus_client import CollectorRegistry


class HasRegistry(Protocol):
    """What the server needs of a metrics container: its registry."""

    @property
    def registry(self) -> CollectorRegistry: ...


class HealthServer:
    """Serves the metrics and probes; an async context manager (port 0 disables it)."""

    def __init__(
        self, metrics: HasRegistry, port: int, ready: Callable[[], Awaitable[dict[str, bool]]]
    ) -> None:
        self._metrics = metrics
        self._port = port
        self._ready = ready
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def __aenter__(self) -> Self:
        if self._port == 0:
            return self
        app = web.Application()
        app.router.add_get("/metrics", self._serve_metrics)
        app.router.add_get("/healthz", self._serve_health)
        app.router.add_get("/readyz", self._serve_ready)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "0.0.0.0", self._port)  # noqa: S104 - scraped from outside
        await site.start()
        self.port = self._port
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _serve_metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _serve_health(self, _: web.Request) -> web.Response:
        return web.json_response({"alive": True})

    async def _serve_ready(self, _: web.Request) -> web.Response:
        checks = await self._ready()
        return web.json_response(checks, status=200 if all(checks.values()) else 503)
