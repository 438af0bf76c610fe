"""Paths: which render path a page takes (browser, http, or http first with escalation).

A pure core (`HostRenderMemory`, the per-host decision; `escalation_reason`), the browser
path (`BrowserPath`: the run's context, retried when the browser dies) and a thin shell
(`PageRenderer`, built with both paths, which picks one per page).
"""

from service.paths.browser_path import BrowserPath, PageToRender, RunContexts
from service.paths.learner import HostRenderMemory
from service.paths.renderer import PageRenderer, escalation_reason, static_content

__all__ = [
    "BrowserPath",
    "HostRenderMemory",
    "PageRenderer",
    "PageToRender",
    "RunContexts",
    "escalation_reason",
    "static_content",
]
