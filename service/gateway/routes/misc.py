"""`GET /v2/concurrency-check` and the probes (`/healthz`, `/readyz`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from service.gateway.routes._deps import GatewayDep, TenantDep  # noqa: TC001

router = APIRouter()


@router.get("/v2/concurrency-check", tags=["account"], summary="Active jobs and the limit")
async def concurrency_check(gateway: GatewayDep, tenant: TenantDep) -> dict[str, Any]:
    """Jobs of the caller's tenant not ended yet, over every replica, and its limit."""
    active = len(gateway.view.active(tenant=tenant))
    return {
        "success": True,
        "concurrency": active,
        "maxConcurrency": gateway.max_concurrency(tenant),
    }


@router.get("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", include_in_schema=False)
async def readyz(gateway: GatewayDep) -> JSONResponse:
    """Ready once the job view holds what the topics held at start."""
    if gateway.ready:
        return JSONResponse({"status": "ready"})
    return JSONResponse({"status": "rebuilding the job view"}, status_code=503)
