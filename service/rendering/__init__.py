"""Rendering paths: the browser, one HTTP request, or HTTP first with escalation (`auto`)."""

from service.rendering.learner import HostRenderMemory
from service.rendering.shell import ShellReason, selector_present, shell_reason

__all__ = ["HostRenderMemory", "ShellReason", "selector_present", "shell_reason"]
