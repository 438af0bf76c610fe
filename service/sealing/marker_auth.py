"""The gateway's marker in a request's metadata is signed: a record any producer may write
cannot pass for a tenant's job. HMAC-SHA256 over the request_id and the marker (canonical
JSON), keyed by the gateway secret. Pure; every reader of a marker calls `verified`.

The key is `CRAWL_GATEWAY_SECRET`; without it, one derived from the keys file's bytes (every
replica mounts the same file, producers do not), or, for an open gateway (no keys file, no
tenants to protect), from the requests topic's name: then a marker only resists accidents.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import TYPE_CHECKING, Any, Final

from service.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from service.settings import Settings

SIGNATURE_KEY: Final = "sig"
"""The key of the signature inside a marker (not itself signed)."""

DERIVATION_LABEL: Final = b"crawlstream gateway marker v1\0"
"""What a derived secret is hashed under, so it is not the keys file's plain digest."""


def sign_marker(secret: bytes, request_id: str, marker: Mapping[str, Any]) -> str:
    """The signature (hex) of `marker` on the request `request_id` (its `sig` ignored)."""
    body = {key: value for key, value in marker.items() if key != SIGNATURE_KEY}
    message = json.dumps(
        [request_id, body], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def verify_marker(
    secret: bytes, request_id: str, marker: Mapping[str, Any], signature: object
) -> bool:
    """Whether `signature` is the gateway's signature of `marker` on `request_id`."""
    if not isinstance(signature, str):
        return False
    expected = sign_marker(secret, request_id, marker)
    return hmac.compare_digest(expected.encode(), signature.encode())


def sealed(secret: bytes, request_id: str, marker: Mapping[str, Any]) -> dict[str, Any]:
    """`marker` with its signature under `sig`: what the gateway writes."""
    return {**marker, SIGNATURE_KEY: sign_marker(secret, request_id, marker)}


def verified(secret: bytes, request_id: str, raw: object) -> dict[str, Any] | None:
    """The marker `raw` (as read from metadata) when its `sig` is authentic, else None."""
    if not isinstance(raw, dict):
        return None
    if not verify_marker(secret, request_id, raw, raw.get(SIGNATURE_KEY)):
        return None
    return raw


def marker_secret(settings: Settings) -> bytes:
    """The key markers are signed with (see the module)."""
    if settings.gateway_secret is not None:
        return settings.gateway_secret.get_secret_value().encode()
    path = settings.gateway_keys_file
    if path is None:
        return hashlib.sha256(DERIVATION_LABEL + settings.requests_topic.encode()).digest()
    try:
        return hashlib.sha256(DERIVATION_LABEL + path.read_bytes()).digest()
    except OSError as exc:
        raise ConfigurationError(f"CRAWL_GATEWAY_KEYS_FILE {path}: {exc}") from None


__all__ = ["marker_secret", "sealed", "sign_marker", "verified", "verify_marker"]
