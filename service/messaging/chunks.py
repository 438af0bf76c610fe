"""Large messages travel as ordered chunks of their bytes, with the same key.

A chunked message carries these headers on every chunk; an unchunked one carries none:
`crawlstream-chunk` (`index/count`, from 0), `crawlstream-chunk-id` (what the chunks belong
to), `crawlstream-sha256` (hex digest of the whole reassembled value) and `content-type:
application/vnd.crawlstream.chunk` (a chunk is a piece of the value, not a document of the
value's type). Chunks are cut between UTF-8 characters, so a UTF-8 value gives chunks that
are each valid UTF-8 text (clients that decode every message as a string keep working);
the value is still their bytes joined in index order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

CHUNK_HEADER: Final = "crawlstream-chunk"
CHUNK_ID_HEADER: Final = "crawlstream-chunk-id"
SHA256_HEADER: Final = "crawlstream-sha256"
CONTENT_TYPE_HEADER: Final = "content-type"
CHUNK_CONTENT_TYPE: Final = b"application/vnd.crawlstream.chunk"

MIN_CHUNK_BYTES: Final = 4
"""The longest UTF-8 character: a chunk always has room for one whole character."""

Headers = list[tuple[str, bytes]]


class ChunkError(ValueError):
    """Chunks that do not add up (missing, out of range, or a checksum mismatch)."""


def split(value: bytes, *, chunk_id: str, max_bytes: int) -> list[tuple[bytes, Headers]]:
    """`value` as one message, or as chunks of at most `max_bytes` each."""
    if max_bytes < MIN_CHUNK_BYTES:
        raise ValueError(f"chunks need at least {MIN_CHUNK_BYTES} bytes, not {max_bytes}")
    if len(value) <= max_bytes:
        return [(value, [])]
    digest = hashlib.sha256(value).hexdigest().encode()
    pieces = list(_pieces(value, max_bytes))
    return [
        (
            piece,
            [
                (CHUNK_HEADER, f"{index}/{len(pieces)}".encode()),
                (CHUNK_ID_HEADER, chunk_id.encode()),
                (SHA256_HEADER, digest),
                (CONTENT_TYPE_HEADER, CHUNK_CONTENT_TYPE),
            ],
        )
        for index, piece in enumerate(pieces)
    ]


def with_chunk_headers(headers: Headers, chunk_headers: Headers) -> Headers:
    """A chunk's headers: the message's own, except those the chunk sets (its content type)."""
    replaced = {name for name, _ in chunk_headers}
    return [(name, raw) for name, raw in headers if name not in replaced] + chunk_headers


def _pieces(value: bytes, max_bytes: int) -> Iterator[bytes]:
    start = 0
    while start < len(value):
        end = _character_boundary(value, start + max_bytes)
        yield value[start:end]
        start = end


def _character_boundary(value: bytes, end: int) -> int:
    """`end`, moved back to the start of the UTF-8 character it falls inside (if any)."""
    if end >= len(value):
        return len(value)
    for back in range(MIN_CHUNK_BYTES):
        if value[end - back] & _CONTINUATION_MASK != _CONTINUATION_BITS:
            return end - back
    return end  # not UTF-8 here: any cut will do


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


_CONTINUATION_MASK: Final = 0b1100_0000
_CONTINUATION_BITS: Final = 0b1000_0000
"""A byte `b` with `b & _CONTINUATION_MASK == _CONTINUATION_BITS` continues a UTF-8 character."""

_CHUNK_HEADERS: Final = frozenset({CHUNK_HEADER, CHUNK_ID_HEADER, SHA256_HEADER})
