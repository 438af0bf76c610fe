"""`crawlstream mcp`: the MCP server on standard input and output, for a desktop client or an
agent runtime that starts it. The gateway runs in this process on the operator's settings
(Kafka, limits, egress policy), without API keys: whoever can start the command already holds
the operator's configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
from mcp.server.stdio import stdio_server

from service.gateway.app import create_app
from service.mcp._api import V2Api
from service.mcp.http import wait_of
from service.mcp.server import build_server

if TYPE_CHECKING:
    from service.settings import Settings

log = structlog.get_logger(__name__)


async def serve_stdio(settings: Settings) -> None:
    """Serve until the client closes standard input."""
    operator = settings.model_copy(update={"gateway_keys_file": None})
    app = create_app(operator)
    async with app.router.lifespan_context(app):
        api = V2Api(app, wait_s=wait_of(operator))
        try:
            server = build_server(api)
            async with stdio_server() as (read_stream, write_stream):
                log.info("mcp.stdio_started")
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            await api.aclose()
