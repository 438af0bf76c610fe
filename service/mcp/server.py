"""The MCP server (the SDK's low-level `Server`): lists the tools, runs a call, and answers a
failure as a tool error carrying its message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import structlog
from mcp.server.lowlevel import Server
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

from service.mcp._calls import Call
from service.mcp._errors import ToolCallError
from service.mcp._tools import BY_NAME, TOOLS

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from service.mcp._api import V2Api
    from service.mcp._tools import ToolSpec

log = structlog.get_logger(__name__)

NAME: Final = "crawlstream"
INSTRUCTIONS: Final = (
    "Web pages as markdown from a Crawlstream cluster, with Firecrawl's tool names: "
    "firecrawl_scrape for one page, firecrawl_map for a site's URLs, firecrawl_crawl (then "
    "firecrawl_check_crawl_status) for many pages of a site, firecrawl_batch_scrape for a list "
    "of URLs. No web search and no extraction by a language model here."
)


def build_server(api: V2Api) -> Server[Any]:
    """The server over `api`; over HTTP each call carries the agent's `Authorization`."""

    async def list_tools(
        _: ServerRequestContext[Any], __: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=[_listed(spec) for spec in TOOLS])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        call = Call(api=api, authorization=_authorization(ctx))
        return await run_tool(call, params.name, dict(params.arguments or {}))

    return Server(NAME, instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)


async def run_tool(call: Call, name: str, arguments: dict[str, Any]) -> CallToolResult:
    """The tool's answer, or a tool error with the reason (an unknown tool, a refusal)."""
    spec = BY_NAME.get(name)
    if spec is None:
        return _error(f"Unknown tool: {name}")
    try:
        answer = await spec.run(call, arguments)
    except ToolCallError as exc:
        log.info("mcp.tool_failed", tool=name, error=str(exc))
        return _error(str(exc))
    text = TextContent(type="text", text=answer.text)
    return CallToolResult(content=[text], structured_content=answer.structured)


def _listed(spec: ToolSpec) -> Tool:
    hints = ToolAnnotations(
        title=spec.title,
        read_only_hint=spec.read_only,
        destructive_hint=False,
        open_world_hint=True,
    )
    return Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.schema,
        annotations=hints,
    )


def _authorization(ctx: ServerRequestContext[Any]) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    return None if headers is None else headers.get("authorization")


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
