"""The gateway's endpoints, one module per family (scrape, crawl and batch jobs, the rest)."""

from __future__ import annotations

from service.gateway.routes import jobs, misc, scrape, site_map, watch

ROUTERS = (
    scrape.router,
    jobs.crawl_router,
    watch.router,
    jobs.batch_router,
    site_map.router,
    misc.router,
)
"""Every router, in the order the OpenAPI document lists them."""

__all__ = ["ROUTERS"]
