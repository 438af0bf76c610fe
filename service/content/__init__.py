"""Content: the page model both render paths give, HTML extraction and the app-shell detector;
shaping, selector schemas, structured data, PDF text and the marks of a bot challenge."""

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
