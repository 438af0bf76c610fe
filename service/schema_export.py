"""Generate `schemas/`: the JSON Schema of each message and an AsyncAPI 3 document.

The AsyncAPI document is produced by FastStream from a broker that only declares the topics:
the worker's runtime does not go through FastStream (see docs/architecture.md).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from faststream.kafka import KafkaBroker
from faststream.specification import AsyncAPI

from service.contracts import (
    MESSAGE_MODELS,
    ControlMessage,
    CrawlRequest,
    DeadLetterCode,
    FrontierRecord,
    PageResult,
    PageTask,
    ProgressEvent,
    schema_of,
)
from service.contracts_changes import ChangeRecord
from service.contracts_monitors import MonitorRecord
from service.settings import Settings

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic import BaseModel

_CHUNKING_NOTE = (
    "A result larger than the producer's limit is sent as ordered chunks of its JSON with the "
    "same key. Every chunk carries the headers `crawlstream-chunk` (`index/count`, from 0), "
    "`crawlstream-chunk-id` (`result_id:run_id`) and `crawlstream-sha256` (of the whole "
    "value); concatenate the values in index order and check the digest."
)

_DEAD_LETTER_NOTE = (
    "The original key, value and headers of a record that could not be run, plus the "
    "headers crawlstream-error-code (one of "
    + ", ".join(code.value for code in DeadLetterCode)
    + "), crawlstream-error-message, crawlstream-source-topic, "
    "crawlstream-source-partition, crawlstream-source-offset, crawlstream-worker and "
    "crawlstream-failed-at."
)


_CONTROL_NOTE = (
    "Compacted (cleanup.policy=compact), keyed by request_id; read in full by every worker, "
    "without a consumer group. A cancel stops the request wherever it runs and is remembered "
    "for CRAWL_CANCEL_RETENTION; a null value (tombstone) withdraws it. Readers skip kinds of "
    "`type` they do not know."
)

_PAGES_NOTE = (
    "Internal: one page to render, keyed by the page's host (CRAWL_PAGE_KEY) so that one "
    "fetcher owns each host; written by the coordinator of the page's run."
)

_FRONTIER_NOTE = (
    "Internal to the workers: keyed by request_id, as many partitions as the requests topic. "
    "Fetchers write each finished page's outcome (and a deep crawl's links), coordinators the "
    "pages they dispatched and a deep crawl's sitemap; a coordinator follows the partitions of "
    "its requests and replays a request's records after a failover. Kept for "
    "CRAWL_FRONTIER_RETENTION."
)


_CHANGES_NOTE = (
    "One ChangeRecord per tracked page (CrawlOptions.change_tracking) that is new, changed or "
    "removed since its previous observation under its tag, keyed by the page's URL; never for "
    "a page that is the same. Written at least once."
)


_MONITORS_NOTE = (
    "Compacted, keyed by monitor id, with the partitions of the requests topic: one "
    "MonitorRecord per monitor (a schedule and its targets); a null value (tombstone) deletes "
    "it. The coordinator owning requests partition p fires the monitors of partition p, each "
    "tick once, as one CrawlRequest per target (docs/monitors.md)."
)


def asyncapi_document(settings: Settings) -> dict[str, Any]:
    """The AsyncAPI 3.0 description of the service's topics, built by FastStream."""
    broker = KafkaBroker("localhost:9092")

    @broker.subscriber(
        settings.requests_topic,
        group_id=settings.group_id,
        title="crawl-requests",
        description="Crawl requests, keyed by request_id.",
    )
    @broker.publisher(
        settings.results_topic,
        title="crawl-results",
        schema=PageResult,
        description="One PageResult per page, keyed by request_id. " + _CHUNKING_NOTE,
    )
    @broker.publisher(
        settings.progress_topic,
        title="crawl-progress",
        schema=ProgressEvent,
        description="ProgressEvents of every run, keyed by request_id.",
    )
    @broker.publisher(
        settings.dead_letter_topic,
        title="crawl-dead-letter",
        schema=bytes,
        description=_DEAD_LETTER_NOTE,
    )
    async def crawl(request: CrawlRequest) -> None:
        """A worker: renders every URL of the request and publishes results and progress."""

    @broker.subscriber(
        settings.control_topic,
        title="crawl-control",
        description=_CONTROL_NOTE,
    )
    async def control(message: ControlMessage) -> None:
        """Every worker: reads the whole compacted topic, without a group, and acts on cancels."""

    @broker.subscriber(
        settings.frontier_topic,
        title="crawl-frontier",
        description=_FRONTIER_NOTE,
    )
    async def frontier(message: FrontierRecord) -> None:
        """A coordinator: follows the partitions of its requests (page outcomes) and replays
        a request's records when it takes the request over."""

    @broker.subscriber(
        settings.pages_topic,
        group_id=settings.fetcher_group_id,
        title="crawl-pages",
        description=_PAGES_NOTE,
    )
    async def pages(message: PageTask) -> None:
        """A fetcher: renders the page and publishes its result, then its page record."""

    @broker.subscriber(
        settings.changes_topic,
        title="crawl-changes",
        description=_CHANGES_NOTE,
    )
    async def changes(message: ChangeRecord) -> None:
        """A consumer of changes: one record per page that is new, changed or removed."""

    @broker.subscriber(
        settings.monitors_topic,
        title="crawl-monitors",
        description=_MONITORS_NOTE,
    )
    async def monitors(message: MonitorRecord) -> None:
        """The coordinators: each fires the monitors of the requests partitions it owns."""

    spec = AsyncAPI(
        broker, title="Crawlstream", version="1", description="Kafka-native crawl microservice."
    )
    document: dict[str, Any] = spec.to_specification().to_jsonable()
    return document


def rendered_files() -> dict[str, str]:
    """File name -> content of everything `schemas/` should hold (default topic names)."""
    settings = Settings.model_construct()
    records: dict[str, type[BaseModel]] = {
        "ChangeRecord": ChangeRecord,
        "MonitorRecord": MonitorRecord,
    }
    files = {
        f"{name}.schema.json": _json(schema_of(model))
        for name, model in (MESSAGE_MODELS | records).items()
    }
    files["asyncapi.json"] = _json(asyncapi_document(settings))
    return files


def write(out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    files = rendered_files()
    for name, content in files.items():
        (out / name).write_text(content)
    return sorted(files)


def differences(out: Path) -> list[str]:
    """Names of files in `out` that are missing or differ from the models."""
    return [
        name
        for name, content in rendered_files().items()
        if not (out / name).exists() or (out / name).read_text() != content
    ]


def _json(document: object) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
