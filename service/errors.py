"""The project's exceptions: one root, subclasses say what the caller should do."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.contracts import DeadLetterCode


class CrawlstreamError(Exception):
    """Root of every error this project raises on purpose."""


class ConfigurationError(CrawlstreamError):
    """A setting is missing or wrong; the process cannot start."""


class RetryableError(CrawlstreamError):
    """The operation may succeed when tried again (broker away, browser restarting)."""


class PermanentError(CrawlstreamError):
    """Trying again will not help; report the failure and move on."""


class RejectedMessageError(PermanentError):
    """A message on the requests topic is not a valid request: it goes to the dead letters."""

    def __init__(self, code: DeadLetterCode, message: str, request_id: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id


class BrokerUnavailableError(RetryableError):
    """The Kafka broker could not be reached within the deadline."""


class BrowserUnavailableError(RetryableError):
    """The browser could not be started or has died."""
