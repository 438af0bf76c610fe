"""The `crawlstream` command."""

from service.cli.main import main

__all__ = ["main"]
