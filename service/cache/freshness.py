"""What the page cache may store, and what an entry is worth to a request (pure rules).

The cache is a shared cache in RFC 9111's sense: an answer marked `no-store` or `private`
is never stored. An entry younger than the request's `max_age_ms` answers as it is; an older
one is revalidated when it carries a validator (`ETag`, `Last-Modified`), else fetched again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

STORABLE_STATUS: Final = frozenset({200, 203})
"""Answers whose document the cache keeps (a complete, successful representation)."""

NOT_SHARED: Final = frozenset({"no-store", "private"})
"""`Cache-Control` directives that keep an answer out of a shared cache."""


def directives(cache_control: str | None) -> frozenset[str]:
    """The lower-case directive names of a `Cache-Control` value (arguments dropped)."""
    if not cache_control:
        return frozenset()
    names = (part.split("=", 1)[0].strip().lower() for part in cache_control.split(","))
    return frozenset(name for name in names if name)


def storable(status: int | None, headers: Mapping[str, str]) -> bool:
    """Whether a shared cache may keep this answer (lower-case header names)."""
    if status not in STORABLE_STATUS:
        return False
    return not directives(headers.get("cache-control")) & NOT_SHARED


@dataclass(frozen=True, slots=True, kw_only=True)
class Validators:
    """What a conditional request sends to ask whether a stored answer still holds."""

    etag: str | None = None
    last_modified: str | None = None

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> Validators:
        return cls(etag=headers.get("etag"), last_modified=headers.get("last-modified"))

    def __bool__(self) -> bool:
        return self.etag is not None or self.last_modified is not None

    def request_headers(self) -> dict[str, str]:
        """`If-None-Match` and `If-Modified-Since` for the validators there are."""
        sent = {}
        if self.etag is not None:
            sent["If-None-Match"] = self.etag
        if self.last_modified is not None:
            sent["If-Modified-Since"] = self.last_modified
        return sent


class Worth(Enum):
    """What an entry is to one request."""

    FRESH = "fresh"
    """Younger than the request's `max_age_ms`: answer with it."""
    REVALIDATE = "revalidate"
    """Older, with a validator: ask the site whether it still holds."""
    STALE = "stale"
    """Older, without a validator: fetch the page again."""


def worth(*, validated_at_s: float, now_s: float, max_age_ms: int, validators: Validators) -> Worth:
    """What an entry last confirmed at `validated_at_s` is worth at `now_s` (seconds)."""
    if (now_s - validated_at_s) * 1000 < max_age_ms:
        return Worth.FRESH
    return Worth.REVALIDATE if validators else Worth.STALE
