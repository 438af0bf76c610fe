"""Large values split into ordered chunks and come back whole, or fail loudly."""

from __future__ import annotations

import random

import pytest

from service.messaging.chunks import ChunkError, Reassembler, split


def test_small_values_are_not_chunked():
    """A value under the limit is one message without chunk headers."""
    assert split(b"abc", chunk_id="x", max_bytes=10) == [(b"abc", [])]


def test_chunks_reassemble_in_any_arrival_order_of_other_messages():
    """Chunks interleaved with other messages give back the exact value once."""
    value = random.Random(1).randbytes(10_000)
    parts = split(value, chunk_id="r:1", max_bytes=999)
    assert len(parts) == 11
    reassembler = Reassembler()
    outputs = []
    for piece, headers in parts:
        outputs.append(reassembler.add(piece, headers))
        assert reassembler.add(b"plain", []) == b"plain"
    assert outputs[:-1] == [None] * 10
    assert outputs[-1] == value
    assert reassembler.pending == 0


def test_corrupted_chunk_is_detected():
    """A changed chunk fails the checksum instead of giving a wrong value."""
    parts = split(b"x" * 100, chunk_id="c", max_bytes=30)
    reassembler = Reassembler()
    *first, (last, headers) = parts
    for piece, chunk_headers in first:
        reassembler.add(piece, chunk_headers)
    with pytest.raises(ChunkError, match="checksum"):
        reassembler.add(last[:-1] + b"y", headers)
