"""The OpenAPI document lists every Firecrawl endpoint the gateway serves (no broker needed:
the document comes from the routes)."""

from __future__ import annotations

from service.gateway import create_app
from service.settings import Settings


def test_the_openapi_document_lists_the_v2_endpoints():
    paths = create_app(Settings()).openapi()["paths"]
    expected = {
        "/v2/scrape": {"post"},
        "/v2/crawl": {"post"},
        "/v2/crawl/active": {"get"},
        "/v2/crawl/{job_id}": {"get", "delete"},
        "/v2/crawl/{job_id}/errors": {"get"},
        "/v2/batch/scrape": {"post"},
        "/v2/batch/scrape/{job_id}": {"get", "delete"},
        "/v2/batch/scrape/{job_id}/errors": {"get"},
        "/v2/map": {"post"},
        "/v2/concurrency-check": {"get"},
    }
    assert {path: set(paths[path]) for path in expected} == expected
    assert "/healthz" not in paths
