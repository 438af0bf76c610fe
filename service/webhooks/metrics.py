"""The dispatcher's metrics, in a registry of their own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class WebhookMetrics:
    """`crawl_webhook_events_total{outcome}`: delivered, dropped (given up), expired."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.events = Counter(
            "crawl_webhook_events",
            "Webhook events handled, by outcome (delivered, dropped, expired).",
            ["outcome"],
            registry=self.registry,
        )
