"""`/mcp` on the gateway: the streamable HTTP transport, stateless (any replica answers any
agent: no session lives on one), JSON answers; the v2 API's key check in front of it."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.routing import Route

from service.gateway.errors import ApiError
from service.gateway.routes._deps import tenant_of
from service.gateway.service import MAP_TIMEOUT_MS
from service.mcp._api import V2Api
from service.mcp.server import build_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fastapi import FastAPI
    from starlette.types import Receive, Scope, Send

    from service.settings import Settings

PATH: Final = "/mcp"

NO_HOST_CHECK: Final = TransportSecuritySettings(enable_dns_rebinding_protection=False)
"""The gateway is reached by whatever name its deployment gives it, and every call needs the
tenant's key (as the v2 routes do): the SDK's localhost-only Host check does not apply."""


class McpEndpoint:
    """The ASGI endpoint of `/mcp`: 401 without a valid key (when the gateway has keys), else
    the SDK's transport; tools call the same app's v2 routes in process."""

    def __init__(self, app: FastAPI, settings: Settings) -> None:
        self._api = V2Api(app, wait_s=wait_of(settings))
        self._manager = StreamableHTTPSessionManager(
            app=build_server(self._api),
            stateless=True,
            json_response=True,
            security_settings=NO_HOST_CHECK,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the app's lifespan: the transport's task group, then the API client closed."""
        try:
            async with self._manager.run():
                yield
        finally:
            await self._api.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            tenant_of(HTTPConnection(scope))
        except ApiError as exc:
            refusal = JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
            await refusal(scope, receive, send)
            return
        await self._manager.handle_request(scope, receive, send)


def mount(app: FastAPI, settings: Settings) -> McpEndpoint:
    """Serve MCP at `/mcp` of `app`; the caller runs `running()` in the app's lifespan."""
    endpoint = McpEndpoint(app, settings)
    app.router.routes.append(Route(PATH, endpoint, methods=["GET", "POST", "DELETE"]))
    return endpoint


def wait_of(settings: Settings) -> float:
    """The longest a tool waits for the gateway by default: its scrape or its map time."""
    return max(settings.gateway_scrape_timeout.total_seconds(), MAP_TIMEOUT_MS / 1000)
