"""Writes one run's results and events in order, and keeps them until they are acknowledged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from service.contracts import (
    ErrorCode,
    EventType,
    PageResult,
    ProgressEvent,
    dump,
    result_id_for,
    utc_now,
)
from service.messaging.outbox import Outbox
from service.messaging.publisher import JSON_HEADERS

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from pydantic import JsonValue

    from service.contracts import FrontierRecord, PageTask, RecordSource
    from service.messaging.publisher import Publisher
    from service.settings import Settings

EVENT_ROOM_BYTES: Final = 16_384
"""Room kept below the message limit for the key, headers and framing of an event."""

MAX_DETAIL_CHARS: Final = 2000
"""Longest `detail` an event carries (error messages can be long)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Destinations:
    """What a run's outputs read of the settings: where each goes, who writes it, how large
    an event may be."""

    progress_topic: str
    results_topic: str
    pages_topic: str
    frontier_topic: str
    worker_name: str
    max_event_bytes: int
    """The message limit less the room kept for an event's key, headers and framing."""

    @classmethod
    def from_settings(cls, settings: Settings) -> Destinations:
        return cls(
            progress_topic=settings.progress_topic,
            results_topic=settings.results_topic,
            pages_topic=settings.pages_topic,
            frontier_topic=settings.frontier_topic,
            worker_name=settings.worker_name,
            max_event_bytes=int(settings.max_message_bytes) - EVENT_ROOM_BYTES,
        )


class RunOutputs:
    """The results and progress events of one run: `seq` without gaps, counts kept here."""

    def __init__(
        self,
        publisher: Publisher,
        to: Destinations,
        *,
        request_id: str,
        run_id: str,
        total: int,
        request_metadata: dict[str, JsonValue],
        source: RecordSource,
        on_resend: Callable[[int], None] | None = None,
        owned: asyncio.Event | None = None,
    ) -> None:
        self._to = to
        self._outbox = Outbox(publisher, on_resend=on_resend, owned=owned)
        self.request_id = request_id
        self.run_id = run_id
        self.total = total
        self._metadata = request_metadata
        self.source = source
        self._seq = 0
        self.succeeded = 0
        self.failed = 0
        self.cancelled = 0
        """Results with error code `cancelled` (counted apart from `failed`)."""
        self.discovered: int | None = None
        """A deep crawl's unique in-scope URLs so far (None for a list crawl)."""
        self._frontier_records = 0
        """Frontier records written by this run (numbers their chunk ids)."""

    async def event(
        self,
        kind: EventType,
        *,
        detail: str | None = None,
        url: str | None = None,
        result_id: str | None = None,
    ) -> None:
        event = ProgressEvent(
            request_id=self.request_id,
            run_id=self.run_id,
            seq=self._seq,
            type=kind,
            total=self.total,
            succeeded=self.succeeded,
            failed=self.failed,
            cancelled=self.cancelled,
            at=utc_now(),
            worker=self._to.worker_name,
            detail=detail[:MAX_DETAIL_CHARS] if detail else detail,
            url=url,
            result_id=result_id,
            request_metadata=self._metadata,
            source=self.source,
            discovered=self.discovered,
        )
        self._seq += 1
        await self._outbox.put(
            self._to.progress_topic, self.request_id, self._fit(event), JSON_HEADERS
        )

    async def result(self, result: PageResult) -> None:
        """Publish a page's result, then its page event with the running counts."""
        await self._outbox.put(
            self._to.results_topic,
            self.request_id,
            dump(result),
            JSON_HEADERS,
            chunk_id=f"{result.result_id}:{result.run_id}",
        )
        if result.ok:
            self.succeeded += 1
        elif result.error is not None and result.error.code is ErrorCode.CANCELLED:
            self.cancelled += 1
        else:
            self.failed += 1
        kind = EventType.PAGE_SUCCEEDED if result.ok else EventType.PAGE_FAILED
        detail = result.error.code.value if result.error else None
        await self.event(kind, url=result.url, result_id=result.result_id, detail=detail)

    async def page_done(self, url: str, outcome: str, error_code: str | None) -> None:
        """Count a page a fetcher finished (its result is published) and send its event."""
        self.count(outcome)
        kind = EventType.PAGE_SUCCEEDED if outcome == "succeeded" else EventType.PAGE_FAILED
        result_id = result_id_for(self.request_id, url)
        await self.event(kind, url=url, result_id=result_id, detail=error_code)

    async def dispatch(self, task: PageTask, key: str, partition: int | None) -> None:
        """Put a page task on the pages topic, keyed by its host, on its host's partition
        (do not wait)."""
        await self._outbox.put(
            self._to.pages_topic, key, dump(task), JSON_HEADERS, partition=partition
        )

    def count(self, outcome: str) -> None:
        """Count a page an earlier run of the job finished (a deep crawl taken over)."""
        if outcome == "succeeded":
            self.succeeded += 1
        elif outcome == "cancelled":
            self.cancelled += 1
        else:
            self.failed += 1

    async def frontier(self, record: FrontierRecord) -> None:
        """Write a deep crawl's record to the frontier topic (after what was put before); a
        record larger than one message goes as ordered chunks, which the replay joins."""
        self._frontier_records += 1
        await self._outbox.put(
            self._to.frontier_topic,
            self.request_id,
            dump(record),
            JSON_HEADERS,
            chunk_id=f"frontier:{self.run_id}:{self._frontier_records}",
        )

    async def acknowledged(self) -> None:
        """Wait until the broker acknowledged everything published so far (re-sending what a
        broker outage lost, never rendering it again)."""
        await self._outbox.flush()

    def _fit(self, event: ProgressEvent) -> bytes:
        """The event's JSON; if it would not fit in one message, its echo of the request's
        metadata is replaced by a marker saying so (the results still carry it)."""
        value = dump(event)
        if len(value) <= self._to.max_event_bytes:
            return value
        marker: dict[str, JsonValue] = {
            "crawlstream_omitted": f"request_metadata of {len(value)} bytes left out of events"
        }
        return dump(event.model_copy(update={"request_metadata": marker}))
