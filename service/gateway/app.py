"""The ASGI app: FastAPI (OpenAPI from the routes, Starlette's WebSockets), served by uvicorn.

Firecrawl's error shape for every failure: `{"success": false, "error": ..., "details"}`.
"""

from __future__ import annotations

import asyncio
import signal
import time
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Final, Protocol

import structlog
import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException

from service.errors import BrokerUnavailableError
from service.gateway.bodies import BodyLimit
from service.gateway.errors import ApiError, Detail, bad_request
from service.gateway.metrics import GatewayMetrics
from service.gateway.routes import ROUTERS
from service.gateway.service import OPEN_TENANT, Gateway
from service.health import HealthServer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
    from contextlib import AbstractAsyncContextManager

    from service.settings import Settings

log = structlog.get_logger(__name__)

TITLE: Final = "Crawlstream gateway (Firecrawl v2 API)"


class Mounted(Protocol):
    """What an extension mounted on the app (`/mcp`) runs during the app's lifespan."""

    def running(self) -> AbstractAsyncContextManager[None]: ...


def create_app(
    settings: Settings,
    metrics: GatewayMetrics | None = None,
    *,
    mounts: Sequence[Callable[[FastAPI, Settings], Mounted]] = (),
) -> FastAPI:
    """The app; its lifespan connects to Kafka and rebuilds the job view. `mounts` add
    endpoints beside the routes (the composition root passes `/mcp`'s)."""
    counted = metrics or GatewayMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with Gateway(settings, counted) as gateway, AsyncExitStack() as stack:
            for extension in extensions:
                await stack.enter_async_context(extension.running())
            app.state.gateway = gateway
            async with HealthServer(counted, settings.gateway_metrics_port, _readiness(gateway)):
                if gateway.keys.open:
                    log.warning("gateway.open", detail="no CRAWL_GATEWAY_KEYS_FILE: no key needed")
                log.info(
                    "gateway.started", port=settings.gateway_port, keys=len(gateway.keys.entries)
                )
                yield

    app = FastAPI(title=TITLE, version="2", lifespan=lifespan)
    app.state.metrics = counted
    for router in ROUTERS:
        app.include_router(router)
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(BrokerUnavailableError, _broker_away)  # type: ignore[arg-type]
    app.add_api_route("/metrics", _metrics, include_in_schema=False)
    extensions = [mount(app, settings) for mount in mounts]  # they call the routes above
    app.middleware("http")(_count)
    app.add_middleware(BodyLimit, limit=int(settings.gateway_max_body_bytes))
    return app


async def serve(
    settings: Settings,
    port: int | None = None,
    *,
    mounts: Sequence[Callable[[FastAPI, Settings], Mounted]] = (),
) -> None:
    """Run the gateway until SIGTERM or SIGINT, then drain and return (exit code 0)."""
    config = uvicorn.Config(
        create_app(settings, mounts=mounts),
        host=settings.gateway_host,
        port=settings.gateway_port if port is None else port,
        log_config=None,
        access_log=False,
        lifespan="on",
        ws="websockets",
    )
    await _Server(config).serve()


class _Server(uvicorn.Server):
    """uvicorn's server, less its re-raising of the signal it shut down on: uvicorn ends a
    drained run by raising SIGTERM again with the default action, so the process died of
    the signal (exit code 143 under `docker stop` or a pod's termination). The gateway
    returns instead, like the worker and the dispatcher."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    details = [
        Detail(path=tuple(error["loc"][1:]) or ("body",), message=str(error["msg"]))
        for error in exc.errors()
    ]
    return await _api_error(_, bad_request(*details))


async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
    return JSONResponse({"success": False, "error": exc.detail}, status_code=exc.status_code)


async def _broker_away(_: Request, exc: BrokerUnavailableError) -> JSONResponse:
    return JSONResponse({"success": False, "error": str(exc)}, status_code=503)


def _readiness(gateway: Gateway) -> Callable[[], Awaitable[dict[str, bool]]]:
    async def ready() -> dict[str, bool]:
        return {"serving": gateway.ready}

    return ready


async def _metrics(request: Request) -> Response:
    """The series (they name tenants): for the operator's key, or anyone on an open gateway."""
    gateway: Gateway = request.app.state.gateway
    if not gateway.operator(request.headers.get("authorization")):
        return JSONResponse(
            {"success": False, "error": "Unauthorized: /metrics needs the operator's key"},
            status_code=401,
        )
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


async def _count(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:  # noqa: ANN401
    started = time.perf_counter()
    response = await call_next(request)
    route = getattr(request.scope.get("route"), "path", "unmatched")
    metrics: GatewayMetrics = request.app.state.metrics
    tenant = getattr(request.state, "tenant", OPEN_TENANT)
    metrics.requests.labels(route, str(response.status_code), tenant).inc()
    metrics.seconds.labels(route).observe(time.perf_counter() - started)
    return response
