"""Deep-crawl frontier: the dedupe form of URLs, the compact seen set, and crawl scope."""

from service.frontier.scope import MATCH_TIMEOUT_S, Scope, ScopeKind
from service.frontier.seen import SeenSet
from service.frontier.urls import fingerprint, normalise
from service.patterns import MAX_PATTERN_LENGTH, MAX_PATTERNS, compile_patterns

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
