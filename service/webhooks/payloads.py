"""Webhook events of a job, in Firecrawl's shape, and how they are signed. Pure.

A request asks for webhooks in its metadata (`metadata.webhook`: `{url, headers, metadata,
events}`), so Kafka producers and the gateway ask the same way; the metadata is echoed on
every progress event, which is what the dispatcher reads.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from service.contracts import EventType, ProgressEvent

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import JsonValue

    from service.contracts_webhook import Hook


class Hooked(Protocol):
    """What a request asked for: which events (`events`), echoing what (`metadata`)."""

    @property
    def events(self) -> tuple[Hook, ...]: ...
    @property
    def metadata(self) -> Mapping[str, JsonValue]: ...


SIGNATURE_HEADER: Final = "X-Firecrawl-Signature"
"""Firecrawl's signature header: `sha256=` and the hex HMAC-SHA256 of the raw body."""

EVENT_ID_HEADER: Final = "X-Crawlstream-Event-Id"
"""A stable id per event (equal on every redelivery): receivers deduplicate on it."""

_HOOKS: Final[dict[EventType, Hook]] = {
    EventType.ACCEPTED: "started",
    EventType.PAGE_SUCCEEDED: "page",
    EventType.COMPLETED: "completed",
    EventType.FAILED: "failed",
    EventType.EXPIRED: "failed",
    EventType.REJECTED: "failed",
    EventType.CANCELLED: "failed",
}
"""The webhook event each progress event gives (failed pages give none: `/errors`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookEvent:
    """One delivery: its stable id, its hook and the body to send."""

    id: str
    hook: Hook
    body: dict[str, Any]


def hook_of(event: ProgressEvent, config: Hooked) -> Hook | None:
    """The webhook event a progress event gives, if the request asked for it."""
    hook = _HOOKS.get(event.type)
    return hook if hook in config.events else None


def webhook_event(
    event: ProgressEvent,
    hook: Hook,
    config: Hooked,
    *,
    prefix: str,
    data: list[dict[str, Any]],
) -> WebhookEvent:
    """The body Firecrawl sends: `{success, type: "<prefix>.<hook>", id, data, metadata}`."""
    suffix = event.result_id if hook == "page" else hook
    event_id = f"{event.request_id}:{suffix}"
    body: dict[str, Any] = {
        "success": hook != "failed",
        "type": f"{prefix}.{hook}",
        "id": event.request_id,
        "eventId": event_id,
        "data": data,
        "metadata": dict(config.metadata),
    }
    if hook == "failed":
        body["error"] = event.detail or event.type.value
    return WebhookEvent(id=event_id, hook=hook, body=body)


def signature(secret: str, body: bytes) -> str:
    """The value of `X-Firecrawl-Signature` for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does: recompute the signature over the raw body, compare in constant
    time."""
    return hmac.compare_digest(signature(secret, body), header)
