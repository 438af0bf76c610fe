"""`submit --follow` and the demo at 80 columns: the progress line and the table fit."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from rich.console import Console

from service.cli.follow_view import follow_live
from service.contracts import EventType, PageResult, ProgressEvent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from service.client import CrawlClient

REQUEST_ID = "58df435270f5444e8597a8bf887a6048"
"""A generated request id: 32 characters, as the demo's."""


def _page(path: str, title: str) -> PageResult:
    return PageResult(
        request_id=REQUEST_ID,
        result_id=path,
        run_id="run-1",
        url=f"http://127.0.0.1:41234{path}",
        ok=True,
        status_code=200,
        title=title,
        elapsed_ms=1406,
        fetched_at=datetime.now(UTC),
        worker="w",
    )


def _completed(pages: int) -> ProgressEvent:
    return ProgressEvent(
        request_id=REQUEST_ID,
        run_id="run-1",
        seq=pages + 1,
        type=EventType.COMPLETED,
        total=20,
        succeeded=20,
        failed=0,
        at=datetime.now(UTC),
        worker="w",
        discovered=20,
    )


class _Client:
    """What `follow_live` reads of a `CrawlClient`: the messages of one submission."""

    def __init__(self, messages: list[ProgressEvent | PageResult]) -> None:
        self.messages = messages

    async def follow(self, _: object) -> AsyncIterator[ProgressEvent | PageResult]:
        for message in self.messages:
            yield message


async def test_a_deep_crawl_followed_at_80_columns_fits_every_line() -> None:
    """A 20-page deep crawl of a 32-character request id at 80 columns: the progress line keeps
    its counts, its detail and its elapsed time whole, each page has one line, and no line is
    wider than 80."""
    pages: list[ProgressEvent | PageResult] = [
        _page(f"/section-{i}/page.html", f"Page {i} of the sample site") for i in range(20)
    ]
    client = cast("CrawlClient", _Client([*pages, _completed(20)]))
    console = Console(width=80, record=True, force_terminal=False)
    assert await follow_live(client, REQUEST_ID, console) == 0
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    [bar] = [line for line in lines if line.startswith(REQUEST_ID[:8])]
    assert "20/20 20 discovered, 20 ok, 0 failed, completed 0:00:0" in bar
    assert sum(line.startswith("/section-") for line in lines) == 20
