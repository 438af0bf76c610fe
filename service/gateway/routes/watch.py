"""The WebSocket on `/v2/crawl/{id}` (and `/v2/batch/scrape/{id}`) that the SDKs' watchers
use: `catchup` with the documents so far, a `document` per new one, then `done` (completed),
`error` (failed) or a last status snapshot (cancelled)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Final

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from websockets.exceptions import ConnectionClosed

from service.gateway.documents import document
from service.gateway.errors import ApiError
from service.gateway.paging import Cursor
from service.gateway.routes._deps import GatewayDep, tenant_of
from service.gateway.routes.jobs import choices_of
from service.gateway.streaming import Streamed, encoded

if TYPE_CHECKING:
    from service.gateway.jobs import JobKind, JobStatus
    from service.gateway.results import Page
    from service.gateway.service import Gateway

router = APIRouter()

WATCH_INTERVAL_S: Final = 0.5
"""Time between two reads of a watched job's results partition."""


@router.websocket("/v2/crawl/{job_id}")
async def watch_crawl(websocket: WebSocket, job_id: str, gateway: GatewayDep) -> None:
    await _watch(websocket, gateway, job_id, "crawl")


@router.websocket("/v2/batch/scrape/{job_id}")
async def watch_batch(websocket: WebSocket, job_id: str, gateway: GatewayDep) -> None:
    await _watch(websocket, gateway, job_id, "batch")


async def _watch(websocket: WebSocket, gateway: Gateway, job_id: str, kind: JobKind) -> None:
    await websocket.accept()
    with contextlib.suppress(WebSocketDisconnect, ConnectionClosed):
        try:
            status = await gateway.status(job_id, kind, tenant_of(websocket))
        except ApiError as exc:
            await websocket.send_json({"type": "error", "error": exc.message})
            await websocket.close()
            return
        await _stream(websocket, gateway, status)
        await websocket.close()


async def _stream(websocket: WebSocket, gateway: Gateway, status: JobStatus) -> None:
    """`catchup` with the first page of documents, the rest of the catch-up as `document`
    messages a page at a time (a watcher holds one page at most: 100 documents or 10 MB of
    results), then every new document as it comes. Each page is encoded a slice at a time
    and sent in one of the tenant's turns (`Gateway.reading`)."""
    start = Cursor(offset=status.marker.results_offset)
    async with gateway.reading(status, start) as page:
        docs = Streamed(document(result, choices_of(status)) for result in page.results)
        catchup = {"type": "catchup", "data": _snapshot(status, docs)}
        await websocket.send_text(await encoded(catchup, allow_nan=True))
    while not _finished(status, page):
        if page.at_end:
            await asyncio.sleep(WATCH_INTERVAL_S)
        status = gateway.view.status(status.id) or status
        async with gateway.reading(status, page.next) as page:
            for result in page.results:
                message = {"type": "document", "data": document(result, choices_of(status))}
                await websocket.send_text(await encoded(message, allow_nan=True))
    await websocket.send_json(_last(status))


def _finished(status: JobStatus, page: Page) -> bool:
    return status.terminal and page.at_end and page.next.returned >= status.completed


def _snapshot(status: JobStatus, docs: Streamed | list[Any]) -> dict[str, Any]:
    return {
        "status": status.state,
        "total": status.total,
        "completed": status.completed,
        "creditsUsed": status.completed,
        "data": docs,
    }


def _last(status: JobStatus) -> dict[str, Any]:
    if status.state == "completed":
        return {"type": "done", "data": _snapshot(status, [])}
    if status.state == "failed":
        return {"type": "error", "error": f"the job {status.state}"}
    return {"type": "status", "data": _snapshot(status, [])}
