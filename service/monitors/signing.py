"""A monitor's tenant and its checks' markers carry the gateway's signature
(`sealing/marker_auth.py`, the key of `CRAWL_GATEWAY_SECRET`): a record or a check request
that any producer could write passes for no tenant's.

The gateway signs each monitor record it writes (the whole record, so a producer cannot
change a tenant's targets or webhook and keep the signature); a coordinator fires only a
record whose tenant is signed (or that names none) and signs each check request's
`metadata.monitor` over its request id, as the gateway signs its jobs' markers. The gateway's
view and the webhook dispatcher take a check request only with an authentic marker. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from service.contracts_monitors import MonitorCheckMarker, MonitorRecord, SkippedCheck
from service.sealing.marker_auth import sealed, sign_marker, verified, verify_marker

if TYPE_CHECKING:
    from collections.abc import Mapping

SKIP_SCOPE: Final = "skipped:"
"""Prefixed to a skipped check's id where it is signed."""

RECORD_SCOPE: Final = "monitor:"
"""Prefixed to a monitor's id where a request id is signed: a record's signature is never a
check marker's."""


def webhook_job(monitor_id: str) -> str:
    """What a monitor's sealed webhook is bound to (a job's is bound to its request id): the
    dispatcher opens it only for an authentic check of that monitor."""
    return RECORD_SCOPE + monitor_id


def _signed_body(record: MonitorRecord) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude={"sig"})


def signed_record(secret: bytes, record: MonitorRecord) -> MonitorRecord:
    """`record` with the gateway's signature (what the gateway and the CLI write)."""
    signature = sign_marker(secret, RECORD_SCOPE + record.id, _signed_body(record))
    return record.model_copy(update={"sig": signature})


def record_authentic(secret: bytes, record: MonitorRecord) -> bool:
    """Whether the record's tenant may be believed: it names none (a Kafka producer's
    monitor), or its signature is the gateway's over the whole record."""
    if record.tenant is None:
        return True
    return verify_marker(secret, RECORD_SCOPE + record.id, _signed_body(record), record.sig)


def signed_marker(secret: bytes, request_id: str, marker: MonitorCheckMarker) -> dict[str, Any]:
    """A check request's `metadata.monitor`, signed over its request id."""
    return sealed(secret, request_id, marker.model_dump(mode="json", exclude={"sig"}))


def authentic_marker(
    secret: bytes, request_id: str, metadata: Mapping[str, Any], key: str
) -> MonitorCheckMarker | None:
    """The check marker under `key` of a request's metadata when its signature is
    authentic; None otherwise (no marker, a forged or copied one, or one that does not
    parse)."""
    raw = verified(secret, request_id, metadata.get(key))
    if raw is None:
        return None
    try:
        return MonitorCheckMarker.model_validate(raw)
    except ValidationError:
        return None


def signed_skip(secret: bytes, skip: SkippedCheck) -> SkippedCheck:
    """A skipped check as its owner records it."""
    body = skip.model_dump(mode="json", exclude={"sig"})
    return skip.model_copy(update={"sig": sign_marker(secret, SKIP_SCOPE + skip.check_id, body)})


def skip_authentic(secret: bytes, skip: SkippedCheck) -> bool:
    body = skip.model_dump(mode="json", exclude={"sig"})
    return verify_marker(secret, SKIP_SCOPE + skip.check_id, body, skip.sig)
