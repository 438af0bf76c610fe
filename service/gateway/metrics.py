"""The gateway's Prometheus metrics, in a registry of their own (injected in tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class GatewayMetrics:
    """`crawl_gateway_requests_total{route,status,tenant}` and its latency histogram."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "crawl_gateway_requests",
            "HTTP requests answered by the gateway.",
            ["route", "status", "tenant"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "crawl_gateway_request_seconds",
            "Time to answer an HTTP request.",
            ["route"],
            registry=self.registry,
        )
        self.jobs = Counter(
            "crawl_gateway_jobs_started",
            "Jobs (scrape, crawl, batch) started through this replica.",
            ["kind", "tenant"],
            registry=self.registry,
        )
