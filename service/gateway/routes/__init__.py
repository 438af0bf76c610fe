"""The gateway's endpoints, one module per family (scrape, crawl and batch jobs, the rest)."""

from __future__ import annotations

from service.gateway.routes import jobs, misc, monitors, scrape, site_map, watch

ROUTERS = (
    scrape.router,
    jobs.crawl_router,
    watch.router,
    jobs.batch_router,
    site_map.router,
    monitors.router,
    misc.router,
)
"""Every router, in the order the OpenAPI document lists them."""

__all__ = ["ROUTERS"]
