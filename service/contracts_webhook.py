"""A request's webhook configuration (`metadata.webhook`), as Kafka producers and the gateway
give it: part of the request's contract, read by the gateway and the webhook dispatcher."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

WEBHOOK_KEY: Final = "webhook"
"""The key of the webhook configuration in a request's metadata."""

Hook = Literal["started", "page", "completed", "failed"]

ALL_HOOKS: Final[tuple[Hook, ...]] = ("started", "page", "completed", "failed")


class WebhookConfig(BaseModel):
    """Where and what to deliver, as Firecrawl's `webhook` object."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1, max_length=4096)
    headers: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    events: tuple[Hook, ...] = ALL_HOOKS

    @classmethod
    def of(cls, metadata: dict[str, Any]) -> WebhookConfig | SealedWebhook | None:
        """The request's webhook as given: plain, sealed by a gateway, or none."""
        raw = metadata.get(WEBHOOK_KEY)
        if isinstance(raw, str):
            return cls(url=raw)
        if isinstance(raw, dict) and "sealed" in raw:
            return SealedWebhook.model_validate(raw)
        return cls.model_validate(raw) if isinstance(raw, dict) else None


class SealedWebhook(BaseModel):
    """A gateway job's webhook: its target (URL, headers) and tenant sealed with a key only
    the gateway and the dispatcher hold, so no credential of it is echoed in events."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sealed: str = Field(min_length=1, max_length=65536)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    events: tuple[Hook, ...] = ALL_HOOKS
