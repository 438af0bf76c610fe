"""Large values split into ordered chunks and come back whole, or fail loudly."""

from __future__ import annotations

import random

import pytest

from service.messaging.chunks import ChunkError, Reassembler, split, with_chunk_headers


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


MULTI_BYTE_TEXT = "aé€😀" * 997
"""Characters of one to four UTF-8 bytes, so cuts land inside characters of every length."""


@pytest.mark.parametrize("max_bytes", [4, 5, 6, 7, 999, 1000, 1001, 1002])
def test_utf8_values_are_cut_between_characters(max_bytes):
    """Each chunk of UTF-8 text is valid UTF-8 on its own; joined bytes give the value back."""
    value = MULTI_BYTE_TEXT.encode()
    parts = split(value, chunk_id="c", max_bytes=max_bytes)
    assert len(parts) > 1
    for piece, _ in parts:
        assert 0 < len(piece) <= max_bytes
        piece.decode()
    assert b"".join(piece for piece, _ in parts) == value
    reassembler = Reassembler()
    assert [reassembler.add(*part) for part in parts][-1] == value


def test_bytes_that_are_not_utf8_still_split_and_reassemble():
    """A value of continuation bytes only (never UTF-8) is cut at the limit and comes back."""
    value = b"\x80" * 1000
    parts = split(value, chunk_id="c", max_bytes=64)
    assert [len(piece) for piece, _ in parts] == [64] * 15 + [40]
    reassembler = Reassembler()
    assert [reassembler.add(*part) for part in parts][-1] == value


def test_a_limit_below_one_character_is_refused():
    """Chunks of fewer than four bytes could not hold every character."""
    with pytest.raises(ValueError, match="at least 4"):
        split(b"abcdef", chunk_id="c", max_bytes=3)


def test_chunks_are_labelled_as_chunks_not_with_the_values_content_type():
    """Every chunk says `application/vnd.crawlstream.chunk`; other message headers stay."""
    headers = [("content-type", b"application/json"), ("schema-version", b"1")]
    for _, chunk_headers in split(b"{}" * 100, chunk_id="c", max_bytes=30):
        merged = dict(with_chunk_headers(headers, chunk_headers))
        assert merged["content-type"] == b"application/vnd.crawlstream.chunk"
        assert merged["schema-version"] == b"1"
        assert len(with_chunk_headers(headers, chunk_headers)) == len(merged)
