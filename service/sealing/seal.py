"""Sealing: the gateway writes a job's webhook target (URL, headers, tenant) into the request
as an opaque token that only the holders of the seal key (gateway, dispatcher) can read, so
the target's credentials are never echoed in events or results. Pure, standard library only.

Encrypt-then-MAC: the plaintext is XORed with an HMAC-SHA256 keystream (counter mode over a
random nonce), and the nonce and ciphertext are authenticated with HMAC-SHA256 under a second
key derived from the same seal key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Final

VERSION: Final = "v1"
"""The token's prefix: `v1.` then URL-safe base64 of nonce, ciphertext and tag."""

NONCE_BYTES: Final = 16
TAG_BYTES: Final = 32
BLOCK_BYTES: Final = 32
"""One keystream block: the output of one HMAC-SHA256."""


class SealError(ValueError):
    """A token that does not open: malformed, or sealed under another key, or altered."""


def derive(material: bytes) -> bytes:
    """The seal key of an operator's secret (never the secret itself: the same secret may
    also sign webhook bodies)."""
    return hmac.new(material, b"crawlstream webhook seal", hashlib.sha256).digest()


def seal(key: bytes, plaintext: bytes) -> str:
    """A token of `plaintext` that `open_sealed` with the same key gives back."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    cipher = _xor(plaintext, _keystream(_subkey(key, b"enc"), nonce, len(plaintext)))
    tag = _tag(key, nonce, cipher)
    return f"{VERSION}.{base64.urlsafe_b64encode(nonce + cipher + tag).decode()}"


def open_sealed(key: bytes, token: str) -> bytes:
    """The plaintext of a token; SealError unless it was sealed with `key`, unaltered."""
    prefix, _, body = token.partition(".")
    if prefix != VERSION:
        raise SealError("not a sealed webhook target of this version")
    try:
        raw = base64.urlsafe_b64decode(body.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise SealError("the sealed webhook target is not base64") from None
    if len(raw) < NONCE_BYTES + TAG_BYTES:
        raise SealError("the sealed webhook target is too short")
    nonce, cipher, tag = raw[:NONCE_BYTES], raw[NONCE_BYTES:-TAG_BYTES], raw[-TAG_BYTES:]
    if not hmac.compare_digest(tag, _tag(key, nonce, cipher)):
        raise SealError("the sealed webhook target was not sealed with this key")
    return _xor(cipher, _keystream(_subkey(key, b"enc"), nonce, len(cipher)))


def _subkey(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, purpose, hashlib.sha256).digest()


def _tag(key: bytes, nonce: bytes, cipher: bytes) -> bytes:
    message = VERSION.encode() + nonce + cipher
    return hmac.new(_subkey(key, b"mac"), message, hashlib.sha256).digest()


def _keystream(key: bytes, nonce: bytes, size: int) -> bytes:
    blocks = (size + BLOCK_BYTES - 1) // BLOCK_BYTES
    return b"".join(
        hmac.new(key, nonce + n.to_bytes(8, "big"), hashlib.sha256).digest() for n in range(blocks)
    )[:size]


def _xor(data: bytes, stream: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, stream, strict=True))
