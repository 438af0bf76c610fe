"""How `crawlstream submit --follow` shows a request: a live bar and a table, or raw JSON."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from service.cli.results_table import summary_table
from service.contracts import EventType, PageResult, ProgressEvent

if TYPE_CHECKING:
    from service.client import CrawlClient, Submission

BAR_WIDTH: Final = 12
"""Characters of the progress bar: the counts beside it say the same, and the line fits in 80
columns with a deep crawl's detail."""

SHORT_ID: Final = 9
"""The longest request id the progress line shows whole; a longer one is cut to its first 8
characters and an ellipsis."""


async def follow_json(client: CrawlClient, submission: Submission | str) -> int:
    """One message per line, as on the wire; exit 0 when the request completed."""
    last: ProgressEvent | None = None
    async for message in client.follow(submission):
        sys.stdout.write(message.model_dump_json() + "\n")
        sys.stdout.flush()
        if isinstance(message, ProgressEvent):
            last = message
    return 0 if last is not None and last.type == EventType.COMPLETED else 1


def _short(request_id: str) -> str:
    """A request id as the progress line shows it (the whole id is printed on submit)."""
    if len(request_id) <= SHORT_ID:
        return request_id
    return request_id[: SHORT_ID - 1] + "…"


def _detail(event: ProgressEvent) -> str:
    found = "" if event.discovered is None else f"{event.discovered} discovered, "
    cancelled = f", {event.cancelled} cancelled" if event.cancelled else ""
    return f"{found}{event.succeeded} ok, {event.failed} failed{cancelled}, {event.type.value}"


async def follow_live(
    client: CrawlClient, submission: Submission | str, console: Console | None = None
) -> int:
    """A progress bar while pages finish, then a summary table of the results."""
    console = console or Console()
    results: list[PageResult] = []
    last: ProgressEvent | None = None
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=BAR_WIDTH),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        name = submission if isinstance(submission, str) else submission.request_id
        bar = progress.add_task(_short(name), total=None, detail="waiting for a worker")
        async for message in client.follow(submission):
            if isinstance(message, PageResult):
                results.append(message)
                continue
            last = message
            progress.update(
                bar,
                total=message.total or None,
                completed=message.succeeded + message.failed + message.cancelled,
                detail=_detail(message),
            )
    console.print(summary_table(results, console.width))
    if last is not None:
        console.print(
            f"[bold]{last.type.value}[/]: {last.succeeded} succeeded, "
            f"{last.failed} failed, {last.cancelled} cancelled of {last.total} "
            f"(run {last.run_id[:8]})" + (f": {last.detail}" if last.detail else "")
        )
    return 0 if last is not None and last.type == EventType.COMPLETED else 1
