"""`POST /v2/scrape`: one URL, answered when its page is done (or after its `timeout`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.contracts import ErrorCode
from service.gateway.bodies import off_loop
from service.gateway.documents import document, error_message
from service.gateway.errors import ApiError
from service.gateway.mapping import scrape_plan
from service.gateway.routes._deps import GatewayDep, JsonBody, TenantDep  # noqa: TC001

if TYPE_CHECKING:
    from service.contracts import PageResult
    from service.gateway.mapping import ScrapePlan

router = APIRouter(tags=["scrape"])

QUEUE_ALLOWANCE_S: Final = 10.0
"""Time a scrape may spend in Kafka and on a worker beyond its page `timeout`."""

_FAILURES: Final[dict[ErrorCode, int]] = {
    ErrorCode.TIMEOUT: 408,
    ErrorCode.DEADLINE: 408,
    ErrorCode.BLOCKED: 403,
    ErrorCode.ROBOTS: 403,
    ErrorCode.INVALID_URL: 400,
    ErrorCode.INVALID_SELECTOR: 400,
    ErrorCode.BLOCKED_BY_SITE: 403,
    ErrorCode.PROXY_ERROR: 502,
}
"""The HTTP status of a page that failed, by its error code (others: 500)."""

KEEPS_DOCUMENT: Final = frozenset({ErrorCode.HTTP_ERROR})
"""Failures Firecrawl answers with a document (a 404 page is a scraped page, statusCode 404)."""


@router.post("/v2/scrape", summary="Scrape one URL and wait for its document")
async def scrape(
    body: JsonBody, request: Request, gateway: GatewayDep, tenant: TenantDep
) -> JSONResponse:
    url, plan = await off_loop(request, scrape_plan, body, limits=gateway.limits)
    timeout_s = _wait_s(plan, gateway.settings.gateway_scrape_timeout.total_seconds())
    result = await gateway.scrape(url, plan.options, tenant=tenant, timeout_s=timeout_s)
    return JSONResponse(_answer(result, plan))  # documents are plain JSON: no re-encoding


def _wait_s(plan: ScrapePlan, default_s: float) -> float:
    timeout_ms = plan.choices.timeout_ms
    return default_s if timeout_ms is None else timeout_ms / 1000 + QUEUE_ALLOWANCE_S


def _answer(result: PageResult, plan: ScrapePlan) -> dict[str, Any]:
    error = result.error
    if plan.choices.cache_only:
        _check_cached(result, plan)
    if error is None or error.code in KEEPS_DOCUMENT:
        return {"success": True, "data": document(result, plan.choices)}
    raise ApiError(
        status=_FAILURES.get(error.code, 500),
        message=f"Scrape failed: {error_message(error.code, error.message)}",
    )


def _check_cached(result: PageResult, plan: ScrapePlan) -> None:
    """A cache-only read (`lockdown`, `minAge`) without an entry old enough is Firecrawl's 404."""
    choices = plan.choices
    code = "SCRAPE_LOCKDOWN_CACHE_MISS" if choices.lockdown else "SCRAPE_NO_CACHED_DATA"
    missing = result.error is not None and result.error.code is ErrorCode.CACHE_MISS
    if not missing and choices.min_age_ms and result.error is None:
        cached_at = result.cached_at or result.fetched_at
        age_ms = (datetime.now(UTC) - cached_at).total_seconds() * 1000
        missing = age_ms < choices.min_age_ms
    if missing:
        raise ApiError(
            status=404,
            code=code,
            message=f"No cached data for {result.url} that this request may use "
            f"({'lockdown' if choices.lockdown else f'minAge {choices.min_age_ms} ms'})",
        )
