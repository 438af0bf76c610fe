"""What every route gets: the gateway of the app and the caller's tenant."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.requests import HTTPConnection  # noqa: TC002 - FastAPI reads it at runtime

from service.gateway.bodies import json_body
from service.gateway.errors import ApiError
from service.gateway.service import OPEN_TENANT, Gateway


def gateway_of(request: HTTPConnection) -> Gateway:
    found: Gateway = request.app.state.gateway
    return found


def tenant_of(connection: HTTPConnection) -> str:
    """The tenant of the caller's API key; 401 without a valid one (unless the gateway is
    open: then every caller is the open tenant)."""
    gateway = gateway_of(connection)
    entry = gateway.keys.lookup(connection.headers.get("authorization"))
    if entry is None and not gateway.keys.open:
        raise ApiError(
            status=401, message="Unauthorized: a valid API key is required (Bearer token)"
        )
    tenant = OPEN_TENANT if entry is None else entry.tenant
    connection.state.tenant = tenant
    return tenant


def base_url(request: Request) -> str:
    """Where the caller reached this replica (for `next` and job URLs)."""
    return str(request.base_url).rstrip("/")


GatewayDep = Annotated[Gateway, Depends(gateway_of)]
TenantDep = Annotated[str, Depends(tenant_of)]
JsonBody = Annotated[dict[str, Any], Depends(json_body)]
"""A JSON object (parsed off the event loop when large); anything else is Firecrawl's 400."""
