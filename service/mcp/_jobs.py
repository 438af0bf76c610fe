"""Crawls and batch scrapes: started at once (an id), read while they run (status, counts, the
documents so far, paged with `cursor`), cancelled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from service.mcp._answer import Answer
from service.mcp._calls import job_path, text_arg, without
from service.mcp._errors import ArgumentError
from service.mcp._paging import JobCursor, fit, token_of

if TYPE_CHECKING:
    from service.mcp._calls import Call


@dataclass(frozen=True, slots=True, kw_only=True)
class JobKind:
    """A crawl or a batch: its route and the names of its tools."""

    noun: str
    path: str
    status_tool: str
    cancel_tool: str


CRAWL: Final = JobKind(
    noun="crawl",
    path="/v2/crawl",
    status_tool="firecrawl_check_crawl_status",
    cancel_tool="firecrawl_cancel_crawl",
)
BATCH: Final = JobKind(
    noun="batch scrape",
    path="/v2/batch/scrape",
    status_tool="firecrawl_check_batch_status",
    cancel_tool="firecrawl_cancel_batch_scrape",
)

STATUS_KEYS: Final = ("id", "status", "total", "completed", "creditsUsed", "expiresAt")
"""The status fields of Firecrawl's answer kept in the structured copy."""


async def crawl(call: Call, args: dict[str, Any]) -> Answer:
    body = without(args, "webhookHeaders")
    headers = args.get("webhookHeaders")
    if isinstance(body.get("webhook"), str) and headers:
        body["webhook"] = {"url": body["webhook"], "headers": headers}
    answer = await call.post(CRAWL.path, body)
    return _started(CRAWL, str(answer.get("id")), {})


async def batch(call: Call, args: dict[str, Any]) -> Answer:
    options = args.get("options") or {}
    if not isinstance(options, dict):
        raise ArgumentError("options: an object of scrape options")
    body = options | {"urls": args.get("urls")}
    answer = await call.post(BATCH.path, body)
    invalid = answer.get("invalidURLs") or []
    return _started(BATCH, str(answer.get("id")), {"invalidURLs": invalid} if invalid else {})


def _started(kind: JobKind, job_id: str, more: dict[str, Any]) -> Answer:
    text = (
        f"Started {kind.noun} {job_id}. It runs in the background: call {kind.status_tool} "
        f'with id="{job_id}" for its progress and its documents so far; {kind.cancel_tool} '
        "stops it."
    )
    if more:
        text += f" Invalid URLs left out: {', '.join(more['invalidURLs'])}."
    return Answer(text=text, structured={"success": True, "id": job_id, **more})


async def status(kind: JobKind, call: Call, args: dict[str, Any]) -> Answer:
    job_id = text_arg(args, "id")
    cursor = JobCursor.parse(text_arg(args, "cursor", required=False))
    params = {"cursor": cursor.page} if cursor.page else None
    answer = await call.get(job_path(kind.path, args), params)
    documents: list[dict[str, Any]] = (answer.get("data") or [])[cursor.skip :]
    fitted = fit(documents)
    following = _following(cursor, fitted.taken, len(documents), token_of(answer.get("next")))
    head = (
        f"{kind.noun.capitalize()} {job_id}: {answer.get('status')}, "
        f"{answer.get('completed')} of {answer.get('total')} pages done; "
        f"{fitted.taken} documents in this answer."
    )
    parts = [head, *fitted.parts]
    if following is not None:
        parts.append(_more(kind, str(job_id), following, answer.get("status")))
    structured = {key: answer.get(key) for key in STATUS_KEYS} | {
        "id": job_id,
        "next": following,
        "data": fitted.documents,
    }
    return Answer(text="\n\n".join(parts), structured=structured)


def _following(cursor: JobCursor, taken: int, held: int, token: str | None) -> str | None:
    """The cursor of the documents after this answer: the rest of this gateway page, else the
    gateway's next page (None when the job has ended and everything was given)."""
    if taken < held:
        return JobCursor(page=cursor.page, skip=cursor.skip + taken).encode()
    return None if token is None else JobCursor(page=token).encode()


def _more(kind: JobKind, job_id: str, following: str, state: object) -> str:
    later = " (pages not done yet come as the job goes on)" if state == "scraping" else ""
    return (
        f'More documents{later}: call {kind.status_tool} with id="{job_id}" and '
        f'cursor="{following}".'
    )


async def cancel(kind: JobKind, call: Call, args: dict[str, Any]) -> Answer:
    job_id = text_arg(args, "id")
    answer = await call.delete(job_path(kind.path, args))
    text = f"Cancelled {kind.noun} {job_id}: its remaining pages are not fetched."
    return Answer(text=text, structured=answer)
