"""API keys, tenants and their limits: the keys file, the lookup of a bearer token, and the
admission arithmetic over the shared job view. Pure (the file is read once, at start)."""

from __future__ import annotations

import hmac
import json
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from service.errors import ConfigurationError

if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

RATE_WINDOW: Final = timedelta(minutes=1)
"""The window `pages_per_minute` counts pages in."""

CONCURRENCY_RETRY_AFTER_S: Final = 5
"""`Retry-After` of a 429 for too many jobs at once: a job's end cannot be foreseen, so the
caller is told to look again soon."""

BEARER: Final = "bearer "


class KeyEntry(BaseModel):
    """One key of the keys file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(min_length=8)
    tenant: str = Field(min_length=1, max_length=128)
    max_concurrent_jobs: int | None = Field(default=None, ge=1)
    pages_per_minute: int | None = Field(default=None, ge=1)
    webhook_secret: SecretStr | None = Field(default=None, min_length=16)
    """Signs the webhooks of this tenant's jobs (`X-Firecrawl-Signature`); unset: they go
    unsigned (the shared `CRAWL_WEBHOOK_SECRET` is for a gateway without keys)."""


class KeysFile(BaseModel):
    """`CRAWL_GATEWAY_KEYS_FILE`: `{"keys": [...]}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: tuple[KeyEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRing:
    """The keys a gateway accepts; `open` (no keys file) accepts every caller."""

    entries: tuple[KeyEntry, ...] = ()
    open: bool = True

    @classmethod
    def load(cls, path: Path | None) -> KeyRing:
        if path is None:
            return cls()
        try:
            parsed = KeysFile.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError, ValidationError) as exc:
            raise ConfigurationError(f"CRAWL_GATEWAY_KEYS_FILE {path}: {exc}") from None
        return cls(entries=parsed.keys, open=False)

    def lookup(self, authorization: str | None) -> KeyEntry | None:
        """The entry of a `Bearer KEY` header, compared in constant time; None when unknown."""
        if not authorization or not authorization.lower().startswith(BEARER):
            return None
        token = authorization[len(BEARER) :].strip().encode()
        found = None
        for entry in self.entries:
            if hmac.compare_digest(entry.key.encode(), token):
                found = entry
        return found


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """Whether a tenant may start a job now; when not, why and when to try again."""

    allowed: bool
    reason: str = ""
    retry_after_s: int = 0


ALLOWED: Final = Verdict(allowed=True)


def admit(
    entry: KeyEntry | None, *, active: int, recent_pages: list[datetime], now: datetime
) -> Verdict:
    """Admit a new job of `entry`'s tenant, given its jobs not ended (over every replica)
    and the instants of its pages done in the last minute."""
    if entry is None:
        return ALLOWED
    if entry.max_concurrent_jobs is not None and active >= entry.max_concurrent_jobs:
        return Verdict(
            allowed=False,
            reason=f"{active} jobs running, the limit is {entry.max_concurrent_jobs}",
            retry_after_s=CONCURRENCY_RETRY_AFTER_S,
        )
    limit = entry.pages_per_minute
    window = sorted(at for at in recent_pages if now - at < RATE_WINDOW)
    if limit is not None and len(window) >= limit:
        frees = window[len(window) - limit] + RATE_WINDOW
        wait_s = max(1, math.ceil((frees - now).total_seconds()))
        return Verdict(
            allowed=False,
            reason=f"{len(window)} pages in the last minute, the limit is {limit}",
            retry_after_s=wait_s,
        )
    return ALLOWED
