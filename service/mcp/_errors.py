"""What a tool call can fail with; each becomes a tool error (`isError`) whose text is the
message, never a protocol error."""

from __future__ import annotations

from service.errors import CrawlstreamError


class ToolCallError(CrawlstreamError):
    """The call did not do what was asked; the message says why in Firecrawl's words."""


class ArgumentError(ToolCallError):
    """An argument of the tool itself (not of the API request) is wrong."""
