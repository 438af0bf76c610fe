"""Paths: which render path a page takes (browser, http, or http first with escalation).

A pure core (`HostRenderMemory`, the per-host decision; `escalation_reason`) and a thin I/O
shell (`PageRenderer`, which picks the path per page).
"""

from service.paths.learner import HostRenderMemory
from service.paths.renderer import PageRenderer, escalation_reason, static_content

__all__ = ["HostRenderMemory", "PageRenderer", "escalation_reason", "static_content"]
