"""Firecrawl's monitors (`/v2/monitor`): create, list, read, update (pause, resume,
reschedule), delete, run by hand, list checks, read a check's pages by status with `next`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal
from weakref import WeakKeyDictionary

from fastapi import APIRouter, Request

from service.gateway.errors import Detail, bad_request
from service.gateway.monitor_bodies import check_json, monitor_json, page_json
from service.gateway.monitor_service import MonitorDesk
from service.gateway.paging import PAGE_DOCUMENTS
from service.gateway.routes._deps import GatewayDep, JsonBody, TenantDep, base_url
from service.monitors.summary import page_status

if TYPE_CHECKING:
    from service.contracts_monitors import MonitorRecord
    from service.gateway.monitor_view import Check
    from service.gateway.service import Gateway
    from service.monitors.summary import Summary

router = APIRouter(tags=["monitor"])

MAX_LIST: Final = 100
"""Monitors or checks per list at most (`limit`)."""

PageFilter = Literal["same", "new", "changed", "removed", "error"]

_DESKS: WeakKeyDictionary[Gateway, MonitorDesk] = WeakKeyDictionary()


def desk_of(gateway: Gateway) -> MonitorDesk:
    """The replica's monitor desk (it keeps the summaries of ended checks)."""
    desk = _DESKS.get(gateway)
    if desk is None:
        desk = _DESKS[gateway] = MonitorDesk(gateway)
    return desk


async def _monitor(gateway: Gateway, record: MonitorRecord) -> dict[str, Any]:
    desk = desk_of(gateway)
    checks = desk.checks(record)
    last = checks[0] if checks else None
    summary = None if last is None else await desk.summary(last)
    return monitor_json(
        record,
        next_run=desk.next_run(record),
        last=last,
        last_summary=summary,
        webhook=desk.webhook_shown(record),
    )


async def _check(gateway: Gateway, record: MonitorRecord, check: Check) -> dict[str, Any]:
    return _check_body(record, check, await desk_of(gateway).summary(check))


def _check_body(record: MonitorRecord, check: Check, summary: Summary) -> dict[str, Any]:
    return check_json(check, summary, {t.id: t.type for t in record.targets})


def _window(limit: int | None, offset: int | None) -> slice:
    if limit is not None and not 1 <= limit <= MAX_LIST:
        raise bad_request(Detail(path=("limit",), message=f"1 to {MAX_LIST}"))
    if offset is not None and offset < 0:
        raise bad_request(Detail(path=("offset",), message="0 or more"))
    start = offset or 0
    return slice(start, start + (limit or MAX_LIST))


@router.post("/v2/monitor", summary="Create a monitor")
async def create_monitor(body: JsonBody, gateway: GatewayDep, tenant: TenantDep) -> dict[str, Any]:
    record = await desk_of(gateway).create(body, tenant)
    return {"success": True, "data": await _monitor(gateway, record)}


@router.get("/v2/monitor", summary="The caller's monitors")
async def list_monitors(
    gateway: GatewayDep, tenant: TenantDep, limit: int | None = None, offset: int | None = None
) -> dict[str, Any]:
    await gateway.caught_up()
    records = desk_of(gateway).listed(tenant)[_window(limit, offset)]
    return {"success": True, "data": [await _monitor(gateway, r) for r in records]}


@router.get("/v2/monitor/{monitor_id}", summary="A monitor")
async def get_monitor(monitor_id: str, gateway: GatewayDep, tenant: TenantDep) -> dict[str, Any]:
    record = await desk_of(gateway).find(monitor_id, tenant)
    return {"success": True, "data": await _monitor(gateway, record)}


@router.patch("/v2/monitor/{monitor_id}", summary="Update, pause, resume or reschedule")
async def update_monitor(
    monitor_id: str, body: JsonBody, gateway: GatewayDep, tenant: TenantDep
) -> dict[str, Any]:
    record = await desk_of(gateway).update(monitor_id, body, tenant)
    return {"success": True, "data": await _monitor(gateway, record)}


@router.delete("/v2/monitor/{monitor_id}", summary="Delete a monitor")
async def delete_monitor(monitor_id: str, gateway: GatewayDep, tenant: TenantDep) -> dict[str, Any]:
    await desk_of(gateway).delete(monitor_id, tenant)
    return {"success": True}


@router.post("/v2/monitor/{monitor_id}/run", summary="Run a check now")
async def run_monitor(monitor_id: str, gateway: GatewayDep, tenant: TenantDep) -> dict[str, Any]:
    check = await desk_of(gateway).run(monitor_id, tenant)
    record = await desk_of(gateway).find(monitor_id, tenant)
    return {"success": True, "data": await _check(gateway, record, check)}


@router.get("/v2/monitor/{monitor_id}/checks", summary="A monitor's checks, newest first")
async def list_checks(
    monitor_id: str,
    gateway: GatewayDep,
    tenant: TenantDep,
    limit: int | None = None,
    offset: int | None = None,
) -> dict[str, Any]:
    record = await desk_of(gateway).find(monitor_id, tenant)
    await gateway.caught_up()
    checks = desk_of(gateway).checks(record)[_window(limit, offset)]
    return {"success": True, "data": [await _check(gateway, record, c) for c in checks]}


@router.get("/v2/monitor/{monitor_id}/checks/{check_id}", summary="A check and its pages")
async def get_check(
    monitor_id: str,
    check_id: str,
    request: Request,
    gateway: GatewayDep,
    tenant: TenantDep,
    limit: int | None = None,
    skip: int | None = None,
    status: PageFilter | None = None,
) -> dict[str, Any]:
    desk = desk_of(gateway)
    record = await desk.find(monitor_id, tenant)
    check = (await desk.check(monitor_id, check_id, tenant)).snapshot()
    found = await desk.pages(check)
    pages = [
        page_json(result, target)
        for result, target in found
        if status is None or page_status(result) == status
    ]
    window = _window(limit or PAGE_DOCUMENTS, skip)
    data = _check_body(record, check, desk.summary_of(check, found)) | {"pages": pages[window]}
    following = None
    if window.stop < len(pages):
        query = f"skip={window.stop}&limit={window.stop - window.start}"
        query += f"&status={status}" if status else ""
        following = f"{base_url(request)}/v2/monitor/{monitor_id}/checks/{check_id}?{query}"
    return {"success": True, "data": data, "next": following}
