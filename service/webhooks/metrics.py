"""The dispatcher's metrics, in a registry of their own."""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import CollectorRegistry, Counter, Gauge


class SkipReason(StrEnum):
    """Why a progress record was skipped without a delivery."""

    INVALID = "invalid"
    """Not a progress event."""
    INVALID_WEBHOOK = "invalid_webhook"
    """Its `metadata.webhook` is not a webhook configuration."""
    MARKER = "marker"
    """Its gateway job marker cannot be used (invalid, or naming no place of the results)."""
    SEALED = "sealed"
    """Its sealed webhook does not open with this dispatcher's key, or is another job's."""
    FAILED = "failed"
    """An unexpected error while handling it (logged with its traceback)."""


class WebhookMetrics:
    """`crawl_webhook_events_total{outcome}`: delivered, dropped (given up), expired;
    `crawl_webhook_records_skipped_total{reason}`; `crawl_webhook_lanes` (receivers with
    events waiting or in delivery)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.events = Counter(
            "crawl_webhook_events",
            "Webhook events handled, by outcome (delivered, dropped, expired).",
            ["outcome"],
            registry=self.registry,
        )
        self.skipped = Counter(
            "crawl_webhook_records_skipped",
            "Progress records skipped because they cannot be used, by reason.",
            ["reason"],
            registry=self.registry,
        )
        for reason in SkipReason:  # every reason exported from the start, at 0
            self.skipped.labels(reason)
        self.lanes = Gauge(
            "crawl_webhook_lanes",
            "Receivers (scheme://host:port) with events waiting or in delivery.",
            registry=self.registry,
        )
