"""Deep-crawl frontier: URL dedupe form, the compact seen set, and crawl scope."""

from service.frontier.urls import fingerprint, normalise

__all__ = [
    "fingerprint",
    "normalise",
]
