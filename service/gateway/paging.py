"""The `next` cursor of a job's `data`: where in the job's results partition the next page
starts, and how many documents came before it. Pure."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Final

from service.gateway.errors import Detail, bad_request

PAGE_DOCUMENTS: Final = 100
"""Documents per `data` page at most (Firecrawl's paging)."""

PAGE_BYTES: Final = 10 * 1024 * 1024
"""Bytes of results per `data` page at most (Firecrawl's 10 MB)."""

_VERSION: Final = "c1"

MAX_OFFSET: Final = 2**63 - 1
"""Kafka offsets are signed 64-bit: a cursor past this is no position at all."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cursor:
    """A position in the job's results partition (`offset`) and the documents returned
    before it (`returned`): equal positions encode to equal tokens."""

    offset: int
    returned: int = 0

    def token(self) -> str:
        raw = f"{_VERSION}.{self.offset}.{self.returned}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def parse(cls, token: str) -> Cursor:
        """The cursor of `token`; a 400 naming `cursor` when it is not one of ours."""
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
            version, offset, returned = raw.split(".")
            cursor = cls(offset=int(offset), returned=int(returned))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            raise _not_ours() from None
        if version != _VERSION or not 0 <= cursor.offset <= MAX_OFFSET:
            raise _not_ours()
        if not 0 <= cursor.returned <= MAX_OFFSET:
            raise _not_ours()
        return cursor


def _not_ours() -> Exception:
    return bad_request(Detail(path=("cursor",), message="not a cursor of this API"))


def outside(offset: int) -> Exception:
    """The 400 of a cursor outside the job's results (before its start, past the end)."""
    return bad_request(
        Detail(path=("cursor",), message=f"offset {offset} is outside the job's results")
    )
