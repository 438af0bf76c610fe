"""Large messages travel as ordered chunks of their bytes, with the same key.

A chunked message carries these headers on every chunk; an unchunked one carries none:
`crawlstream-chunk` (`index/count`, from 0), `crawlstream-chunk-id` (what the chunks belong
to) and `crawlstream-sha256` (hex digest of the whole reassembled value).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Final

CHUNK_HEADER: Final = "crawlstream-chunk"
CHUNK_ID_HEADER: Final = "crawlstream-chunk-id"
SHA256_HEADER: Final = "crawlstream-sha256"

Headers = list[tuple[str, bytes]]


class ChunkError(ValueError):
    """Chunks that do not add up (missing, out of range, or a checksum mismatch)."""


def split(value: bytes, *, chunk_id: str, max_bytes: int) -> list[tuple[bytes, Headers]]:
    """`value` as one message, or as chunks of at most `max_bytes` each."""
    if len(value) <= max_bytes:
        return [(value, [])]
    digest = hashlib.sha256(value).hexdigest().encode()
    pieces = [value[start : start + max_bytes] for start in range(0, len(value), max_bytes)]
    return [
        (
            piece,
            [
                (CHUNK_HEADER, f"{index}/{len(pieces)}".encode()),
                (CHUNK_ID_HEADER, chunk_id.encode()),
                (SHA256_HEADER, digest),
            ],
        )
        for index, piece in enumerate(pieces)
    ]


@dataclass(slots=True)
class _Partial:
    count: int
    digest: str
    pieces: dict[int, bytes] = field(default_factory=dict)


class Reassembler:
    """Collects chunks; `add` returns the whole value once its last chunk arrived."""

    def __init__(self) -> None:
        self._partials: dict[str, _Partial] = {}

    def add(self, value: bytes, headers: Headers) -> bytes | None:
        found = {name: raw.decode() for name, raw in headers if name in _CHUNK_HEADERS}
        if CHUNK_HEADER not in found:
            return value
        index, count = (int(part) for part in found[CHUNK_HEADER].split("/"))
        if not 0 <= index < count:
            raise ChunkError(f"chunk {index} of {count}")
        chunk_id = found.get(CHUNK_ID_HEADER, "")
        partial = self._partials.setdefault(
            chunk_id, _Partial(count=count, digest=found.get(SHA256_HEADER, ""))
        )
        partial.pieces[index] = value
        if len(partial.pieces) < partial.count:
            return None
        del self._partials[chunk_id]
        whole = b"".join(partial.pieces[i] for i in range(partial.count))
        if hashlib.sha256(whole).hexdigest() != partial.digest:
            raise ChunkError(f"checksum mismatch for {chunk_id}")
        return whole

    @property
    def pending(self) -> int:
        return len(self._partials)


_CHUNK_HEADERS: Final = frozenset({CHUNK_HEADER, CHUNK_ID_HEADER, SHA256_HEADER})
