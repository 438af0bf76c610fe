"""Deep-crawl frontier: URL dedupe form, the compact seen set, and crawl scope."""

from service.frontier.seen import SeenSet
from service.frontier.urls import fingerprint, normalise

__all__ = [
    "SeenSet",
    "fingerprint",
    "normalise",
]
