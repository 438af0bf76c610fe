"""Deep-crawl frontier: the dedupe form of URLs, the compact seen set, and crawl scope."""

from service.frontier.scope import (
    MATCH_TIMEOUT_S,
    MAX_PATTERN_LENGTH,
    MAX_PATTERNS,
    Scope,
    ScopeKind,
    compile_patterns,
)
from service.frontier.seen import SeenSet
from service.frontier.urls import fingerprint, normalise

__all__ = [
    "MATCH_TIMEOUT_S",
    "MAX_PATTERNS",
    "MAX_PATTERN_LENGTH",
    "Scope",
    "ScopeKind",
    "SeenSet",
    "compile_patterns",
    "fingerprint",
    "normalise",
]
