"""The gateway's Prometheus metrics, in a registry of their own (injected in tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class GatewayMetrics:
    """`crawl_gateway_requests_total{route,status,tenant}`, its latency histogram and the
    result reads that failed and cost their reader."""

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
        self.reader_failures = Counter(
            "crawl_gateway_reader_failures",
            "Result reads that failed for a reason other than the caller's request; each "
            "reader is replaced.",
            registry=self.registry,
        )
