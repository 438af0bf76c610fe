"""Rendering paths: the browser, one HTTP request, or HTTP first with escalation (`auto`).

A pure core (`shell_reason`, the app-shell detector; `HostRenderMemory`, the per-host
decision; `escalation_reason`) and a thin I/O shell (`StaticFetcher`, aiohttp through the
egress proxy; `PageRenderer`, which picks the path per page).
"""

from service.crawling.shell import ShellReason, selector_present, shell_reason
from service.rendering.learner import HostRenderMemory
from service.rendering.renderer import PageRenderer, escalation_reason, static_content
from service.rendering.static_fetch import StaticAnswer, StaticFetcher

__all__ = [
    "HostRenderMemory",
    "PageRenderer",
    "ShellReason",
    "StaticAnswer",
    "StaticFetcher",
    "escalation_reason",
    "selector_present",
    "shell_reason",
    "static_content",
]
