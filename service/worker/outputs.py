"""Writes one run's results and events in order, and remembers what awaits acknowledgement."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from service.contracts import EventType, PageResult, ProgressEvent, dump, utc_now

if TYPE_CHECKING:
    from pydantic import JsonValue

    from service.messaging.publisher import Delivery, Publisher
    from service.settings import Settings

JSON_HEADERS: Final = [("content-type", b"application/json"), ("schema-version", b"1")]


class RunOutputs:
    """The results and progress events of one run: `seq` without gaps, counts kept here."""

    def __init__(
        self,
        publisher: Publisher,
        settings: Settings,
        *,
        request_id: str,
        run_id: str,
        total: int,
        request_metadata: dict[str, JsonValue],
    ) -> None:
        self._publisher = publisher
        self._settings = settings
        self.request_id = request_id
        self.run_id = run_id
        self.total = total
        self._metadata = request_metadata
        self._seq = 0
        self.succeeded = 0
        self.failed = 0
        self._deliveries: list[Delivery] = []

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
            at=utc_now(),
            worker=self._settings.worker_name,
            detail=detail,
            url=url,
            result_id=result_id,
            request_metadata=self._metadata,
        )
        self._seq += 1
        self._deliveries += await self._publisher.send(
            self._settings.progress_topic, self.request_id, dump(event), JSON_HEADERS
        )

    async def result(self, result: PageResult) -> None:
        """Publish a page's result, then its page event with the running counts."""
        self._deliveries += await self._publisher.send(
            self._settings.results_topic,
            self.request_id,
            dump(result),
            JSON_HEADERS,
            chunk_id=f"{result.result_id}:{result.run_id}",
        )
        if result.ok:
            self.succeeded += 1
        else:
            self.failed += 1
        kind = EventType.PAGE_SUCCEEDED if result.ok else EventType.PAGE_FAILED
        detail = result.error.code.value if result.error else None
        await self.event(kind, url=result.url, result_id=result.result_id, detail=detail)

    async def acknowledged(self) -> None:
        """Wait until the broker acknowledged everything published so far."""
        deliveries, self._deliveries = self._deliveries, []
        await self._publisher.wait(deliveries)
