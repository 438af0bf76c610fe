"""What every route gets: the gateway of the app and the caller's tenant."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Depends, Request
from starlette.requests import HTTPConnection  # noqa: TC002 - FastAPI reads it at runtime

from service.gateway.service import OPEN_TENANT, Gateway


def gateway_of(request: HTTPConnection) -> Gateway:
    found: Gateway = request.app.state.gateway
    return found


def tenant_of(request: Request) -> str:
    """The tenant of the caller's API key (checked by the keys middleware), else the open one."""
    tenant: str = getattr(request.state, "tenant", OPEN_TENANT)
    return tenant


def base_url(request: Request) -> str:
    """Where the caller reached this replica (for `next` and job URLs)."""
    return str(request.base_url).rstrip("/")


GatewayDep = Annotated[Gateway, Depends(gateway_of)]
TenantDep = Annotated[str, Depends(tenant_of)]
JsonBody = Annotated[dict[str, Any], Body()]
"""A JSON object; anything else is Firecrawl's 400."""
