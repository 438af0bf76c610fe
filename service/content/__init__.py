"""Content: the page model both render paths give, HTML extraction and the app-shell detector."""

from service.content.extract import Extracted, extract
from service.content.page import PageContent
from service.content.shell import ShellReason, selector_present, shell_reason

__all__ = [
    "Extracted",
    "PageContent",
    "ShellReason",
    "extract",
    "selector_present",
    "shell_reason",
]
