"""`POST /v2/map`: a site's URLs from its sitemap and the seed page's links."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from service.gateway.bodies import off_loop
from service.gateway.maplinks import map_plan
from service.gateway.routes._deps import GatewayDep, JsonBody, TenantDep  # noqa: TC001

router = APIRouter(tags=["map"])


@router.post("/v2/map", summary="Discover a site's URLs without scraping every page")
async def map_site(
    body: JsonBody, request: Request, gateway: GatewayDep, tenant: TenantDep
) -> dict[str, Any]:
    plan = await off_loop(request, map_plan, body)
    links = await gateway.map(plan, tenant=tenant)
    return {"success": True, "links": [{"url": url} for url in links]}
