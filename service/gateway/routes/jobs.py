"""Crawl and batch-scrape jobs: start, status with paged `data`, errors, cancel, active."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.gateway.bodies import off_loop
from service.gateway.documents import document
from service.gateway.errors import ApiError
from service.gateway.mapping import batch_plan, crawl_plan
from service.gateway.options import ScrapeChoices
from service.gateway.paging import Cursor
from service.gateway.routes._deps import (
    GatewayDep,
    JsonBody,
    TenantDep,
    base_url,
)
from service.gateway.streaming import Streamed, StreamedJson

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator

    from service.contracts import ErrorCode
    from service.gateway.jobs import JobKind, JobStatus
    from service.gateway.results import Page
    from service.gateway.service import Gateway

crawl_router = APIRouter(tags=["crawl"])
batch_router = APIRouter(tags=["batch scrape"])

RESULTS_RETENTION: Final = timedelta(days=7)
"""Kafka's default `retention.ms`: how long a job's results can be read (`expiresAt`)."""

ROBOTS: Final = "robots"
"""The error code of pages robots.txt disallowed (Firecrawl lists them apart)."""

_PATHS: Final[dict[str, str]] = {"crawl": "/v2/crawl", "batch": "/v2/batch/scrape"}


@crawl_router.post("/v2/crawl", summary="Start a crawl")
async def start_crawl(
    body: JsonBody, request: Request, gateway: GatewayDep, tenant: TenantDep
) -> dict[str, Any]:
    plan = await off_loop(request, crawl_plan, body, limits=gateway.limits)
    job_id = await gateway.start(
        "crawl",
        [plan.url],
        plan.scrape.options,
        plan.scrape.choices,
        tenant=tenant,
        crawl=plan.spec,
        echo=plan.echo,
        webhook=plan.webhook,
    )
    return {"success": True, "id": job_id, "url": f"{base_url(request)}/v2/crawl/{job_id}"}


@crawl_router.get("/v2/crawl/active", summary="Crawls not ended yet (all replicas)")
async def active_crawls(gateway: GatewayDep, tenant: TenantDep) -> dict[str, Any]:
    crawls = [
        {"id": s.id, "teamId": s.marker.tenant, "url": s.marker.url, "options": s.marker.options}
        for s in gateway.view.active(tenant=tenant, kind="crawl")
    ]
    return {"success": True, "crawls": crawls}


@crawl_router.get("/v2/crawl/{job_id}", summary="A crawl's status and a page of its documents")
async def crawl_status(
    job_id: str,
    request: Request,
    gateway: GatewayDep,
    tenant: TenantDep,
    cursor: str | None = None,
) -> StreamedJson:
    return _status(gateway, job_id, "crawl", tenant, cursor, base_url(request))


@crawl_router.get("/v2/crawl/{job_id}/errors", summary="A crawl's failed pages")
async def crawl_errors(job_id: str, gateway: GatewayDep, tenant: TenantDep) -> dict[str, Any]:
    return await _errors(gateway, job_id, "crawl", tenant)


@crawl_router.delete("/v2/crawl/{job_id}", summary="Cancel a crawl")
async def cancel_crawl(job_id: str, gateway: GatewayDep, tenant: TenantDep) -> JSONResponse:
    return await _cancel(gateway, job_id, "crawl", tenant)


@batch_router.post("/v2/batch/scrape", summary="Start a batch scrape")
async def start_batch(
    body: JsonBody, request: Request, gateway: GatewayDep, tenant: TenantDep
) -> dict[str, Any]:
    plan = await off_loop(request, batch_plan, body, limits=gateway.limits)
    job_id = await gateway.start(
        "batch",
        plan.urls,
        plan.scrape.options,
        plan.scrape.choices,
        tenant=tenant,
        webhook=plan.webhook,
    )
    return {
        "success": True,
        "id": job_id,
        "url": f"{base_url(request)}/v2/batch/scrape/{job_id}",
        "invalidURLs": list(plan.invalid_urls) or None,
    }


@batch_router.get("/v2/batch/scrape/{job_id}", summary="A batch's status and documents")
async def batch_status(
    job_id: str,
    request: Request,
    gateway: GatewayDep,
    tenant: TenantDep,
    cursor: str | None = None,
) -> StreamedJson:
    return _status(gateway, job_id, "batch", tenant, cursor, base_url(request))


@batch_router.get("/v2/batch/scrape/{job_id}/errors", summary="A batch's failed pages")
async def batch_errors(job_id: str, gateway: GatewayDep, tenant: TenantDep) -> dict[str, Any]:
    return await _errors(gateway, job_id, "batch", tenant)


@batch_router.delete("/v2/batch/scrape/{job_id}", summary="Cancel a batch scrape")
async def cancel_batch(job_id: str, gateway: GatewayDep, tenant: TenantDep) -> JSONResponse:
    return await _cancel(gateway, job_id, "batch", tenant)


def _status(
    gateway: Gateway, job_id: str, kind: JobKind, tenant: str, token: str | None, base: str
) -> StreamedJson:
    """The job's status and a page of its documents, streamed a few documents at a time
    while the tenant's turn is held (a 10 MB page never holds the event loop at once)."""

    async def made() -> AsyncGenerator[dict[str, Any]]:
        status = await gateway.status(job_id, kind, tenant)
        start = Cursor(offset=status.marker.results_offset)
        cursor = Cursor.parse(token) if token else start
        async with gateway.reading(status, cursor) as page:
            yield _status_body(status, page, f"{base}{_PATHS[kind]}/{job_id}")

    return StreamedJson(made)


def _status_body(status: JobStatus, page: Page, url: str) -> dict[str, Any]:
    choices = choices_of(status)
    done = status.terminal and page.at_end and page.next.returned >= status.completed
    return {
        "success": True,
        "status": status.state,
        "total": status.total,
        "completed": status.completed,
        "creditsUsed": status.completed,
        "expiresAt": (status.marker.created_at + RESULTS_RETENTION).isoformat(),
        "next": None if done else f"{url}?cursor={page.next.token()}",
        "data": Streamed(document(result, choices) for result in page.results),
    }


async def _errors(gateway: Gateway, job_id: str, kind: JobKind, tenant: str) -> dict[str, Any]:
    status = await gateway.status(job_id, kind, tenant)
    cursor = Cursor(offset=status.marker.results_offset)
    errors: list[dict[str, Any]] = []
    robots: list[str] = []
    while True:
        page = await gateway.page(status, cursor, ok_only=False)
        for result in page.results:
            code: ErrorCode | None = result.error.code if result.error else None
            if result.error is None or code is None:
                continue
            if code.value == ROBOTS:
                robots.append(result.url)
                continue
            errors.append(
                {
                    "id": result.result_id,
                    "timestamp": result.fetched_at.isoformat(),
                    "url": result.url,
                    "code": code.value,
                    "error": result.error.message,
                }
            )
        if page.at_end:
            return {"success": True, "errors": errors, "robotsBlocked": robots}
        cursor = page.next


async def _cancel(gateway: Gateway, job_id: str, kind: JobKind, tenant: str) -> JSONResponse:
    status = await gateway.status(job_id, kind, tenant)
    if status.terminal and status.state != "cancelled":
        raise ApiError(status=409, message=f"Job already {status.state}")
    await gateway.cancel(job_id)
    return JSONResponse({"success": True, "status": "cancelled"})


def choices_of(status: JobStatus) -> ScrapeChoices:
    marker = status.marker
    return ScrapeChoices(
        formats=marker.formats,
        full_page=marker.full_page,
        remove_base64_images=marker.remove_base64_images,
        warning=marker.warning,
    )
