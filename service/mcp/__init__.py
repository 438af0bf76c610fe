"""An MCP server over the cluster with Firecrawl's tool names (firecrawl_scrape, firecrawl_map,
firecrawl_crawl, firecrawl_check_crawl_status, ...): on standard input and output
(`crawlstream mcp`) and at the gateway's `/mcp` (streamable HTTP, stateless). Its tools call
the gateway's v2 routes in process, so every rule of the HTTP API holds for them."""

from __future__ import annotations

from service.mcp.server import build_server

__all__ = ["build_server"]
