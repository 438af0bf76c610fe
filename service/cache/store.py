"""The page cache's entries, as the fetchers see them: an interface and its Kafka version.

`KafkaCacheStore` keeps, per page partition this fetcher has looked up, the newest index
record of each key (read from the compacted index topic, caught up at most every
`messaging.compacted.CATCH_UP_S`), and reads a body record by its offset when an entry
answers. It writes an
entry as its body, then its index record pointing at the body's offset.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Protocol, Self

import cramjam
from pydantic import ValidationError

from service.cache.records import CacheIndexRecord, StoredPage
from service.logs import get_logger
from service.messaging.compacted import KeyIndex, OffsetReader
from service.messaging.publisher import Message
from service.messaging.seal import Seal

if TYPE_CHECKING:
    from types import TracebackType

    from aiokafka import ConsumerRecord

    from service.messaging.publisher import Publisher
    from service.settings import Settings

log = get_logger(__name__)

BODY_OVERHEAD_BYTES: Final = 4096
"""Room left in a Kafka message beside a stored page's compressed bytes."""


@dataclass(frozen=True, slots=True)
class PackedPage:
    """A stored page as its body record carries it."""

    page: StoredPage
    raw: bytes


class CacheStore(Protocol):
    """Where a fetcher finds and keeps cache entries, by page partition."""

    async def find(self, partition: int, key: str) -> CacheIndexRecord | None: ...
    async def body(self, partition: int, entry: CacheIndexRecord) -> StoredPage | None: ...
    def pack(self, page: StoredPage) -> PackedPage | None:
        """`page` as its body is written; None when it is larger than a body may be."""

    async def put(self, partition: int, packed: PackedPage, entry: CacheIndexRecord) -> bool:
        """Write the body, then `entry` pointing at it; False when no offset came back."""

    async def refresh(self, partition: int, entry: CacheIndexRecord) -> None: ...


class RecentPages:
    """The stored pages read or written last, within a byte budget (least recent out first):
    a page asked for again is answered without reading the bodies topic."""

    def __init__(self, budget_bytes: int) -> None:
        self._budget = budget_bytes
        self._held = 0
        self._pages: OrderedDict[tuple[int, int], StoredPage] = OrderedDict()

    def get(self, where: tuple[int, int]) -> StoredPage | None:
        page = self._pages.get(where)
        if page is not None:
            self._pages.move_to_end(where)
        return page

    def put(self, where: tuple[int, int], page: StoredPage) -> None:
        size = _size(page)
        if size > self._budget or where in self._pages:
            return
        self._pages[where] = page
        self._held += size
        while self._held > self._budget:
            _, oldest = self._pages.popitem(last=False)
            self._held -= _size(oldest)


def _size(page: StoredPage) -> int:
    return len(page.html) + len(page.screenshot or "")


class IndexSlot:
    """One entry as a fetcher holds it in memory: the index record in about a quarter of a
    pydantic model's bytes (the key and the content hash as raw digests, times as floats)."""

    __slots__ = (
        "body_offset",
        "digest",
        "etag",
        "fetched_at",
        "has_screenshot",
        "last_modified",
        "url",
        "validated_at",
    )

    def __init__(self, record: CacheIndexRecord) -> None:
        self.url = record.url
        self.fetched_at = record.fetched_at.timestamp()
        self.validated_at = record.validated_at.timestamp()
        self.body_offset = record.body_offset
        self.etag = record.etag
        self.last_modified = record.last_modified
        self.digest = bytes.fromhex(record.content_sha256)
        self.has_screenshot = record.has_screenshot

    def record(self, key: bytes) -> CacheIndexRecord:
        return CacheIndexRecord(
            key=key.hex(),
            url=self.url,
            fetched_at=datetime.fromtimestamp(self.fetched_at, UTC),
            validated_at=datetime.fromtimestamp(self.validated_at, UTC),
            body_offset=self.body_offset,
            etag=self.etag,
            last_modified=self.last_modified,
            content_sha256=self.digest.hex(),
            has_screenshot=self.has_screenshot,
        )


def encode_page(page: StoredPage) -> bytes:
    return bytes(cramjam.zstd.compress(page.model_dump_json().encode()))


def decode_page(raw: bytes) -> StoredPage:
    return StoredPage.model_validate_json(bytes(cramjam.zstd.decompress(raw)))


class KafkaCacheStore:
    """`async with KafkaCacheStore(settings, publisher) as store:` the fetcher's cache."""

    def __init__(self, settings: Settings, publisher: Publisher) -> None:
        self._publisher = publisher
        self._index_topic = settings.cache_index_topic
        self._bodies_topic = settings.cache_bodies_topic
        self._seal = Seal.from_settings(settings)
        """Tags what this fetcher stores; entries that are not the deployment's own and
        authentic are not served."""
        self._max_body = int(settings.max_message_bytes) - BODY_OVERHEAD_BYTES
        self._timeout_s = settings.kafka_timeout.total_seconds()
        fetch_bytes = int(settings.max_message_bytes) + 65_536
        self._index = KeyIndex(settings, self._index_topic, self._slot_of)
        self._bodies = OffsetReader(settings, self._bodies_topic, fetch_bytes=fetch_bytes)
        self._recent = RecentPages(int(settings.cache_memory_bytes))

    @property
    def entries(self) -> int:
        """Index entries held here, over every partition read."""
        return self._index.size

    async def __aenter__(self) -> Self:
        await self._index.start()
        await self._bodies.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._index.stop()
        await self._bodies.stop()

    async def find(self, partition: int, key: str) -> CacheIndexRecord | None:
        await self._index.catch_up(partition)
        raw = _raw_key(key)
        slot = self._index.get(partition, raw) if raw is not None else None
        return None if slot is None else slot.record(raw or b"")

    async def body(self, partition: int, entry: CacheIndexRecord) -> StoredPage | None:
        held = self._recent.get((partition, entry.body_offset))
        if held is not None:
            return held
        record = await self._bodies.read(partition, entry.body_offset)
        page = None if record is None else self._page_of(record, entry)
        if page is not None:
            self._recent.put((partition, entry.body_offset), page)
        return page

    def pack(self, page: StoredPage) -> PackedPage | None:
        raw = encode_page(page)
        return None if len(raw) > self._max_body else PackedPage(page, raw)

    async def put(self, partition: int, packed: PackedPage, entry: CacheIndexRecord) -> bool:
        key = entry.key.encode()
        headers = self._seal.headers(self._bodies_topic, key, packed.raw)
        delivery = await self._publisher.send(
            Message(self._bodies_topic, key, packed.raw, headers, partition=partition)
        )
        written = await asyncio.wait_for(delivery, self._timeout_s)
        offset = getattr(written, "offset", None)
        if not isinstance(offset, int):
            return False
        self._recent.put((partition, offset), packed.page)
        await self.refresh(partition, entry.model_copy(update={"body_offset": offset}))
        return True

    async def refresh(self, partition: int, entry: CacheIndexRecord) -> None:
        value = entry.model_dump_json().encode()
        key = entry.key.encode()
        headers = self._seal.headers(self._index_topic, key, value)
        message = Message(self._index_topic, key, value, headers, partition=partition)
        await asyncio.wait_for(await self._publisher.send(message), self._timeout_s)
        raw = _raw_key(entry.key)
        if raw is not None:
            self._index.put(partition, raw, IndexSlot(entry))

    def _slot_of(
        self, partition: int, record: ConsumerRecord[bytes, bytes]
    ) -> tuple[bytes, IndexSlot | None] | None:
        raw = _raw_key((record.key or b"").decode(errors="replace"))
        if raw is None:
            log.warning("cache.index_unreadable", partition=partition, error="not a cache key")
            return None
        if not record.value:  # a purge's tombstone
            return raw, None
        if not self._seal.admits(self._index_topic, record.key, record.value, record.headers):
            return None
        try:
            entry = CacheIndexRecord.model_validate_json(record.value)
        except ValidationError as exc:
            log.warning("cache.index_unreadable", partition=partition, error=str(exc)[:200])
            return None
        return raw, IndexSlot(entry)

    def _page_of(
        self, record: ConsumerRecord[bytes, bytes], entry: CacheIndexRecord
    ) -> StoredPage | None:
        if record.offset != entry.body_offset or record.value is None:
            return None  # compacted away: a newer body of the key replaced it
        if not self._seal.admits(self._bodies_topic, record.key, record.value, record.headers):
            return None
        try:
            page = decode_page(record.value)
        except (ValidationError, cramjam.DecompressionError) as exc:
            log.warning("cache.body_unreadable", offset=record.offset, error=str(exc)[:200])
            return None
        return page if page.key == entry.key else None


def _raw_key(key: str) -> bytes | None:
    """The digest a hex cache key stands for (None: not a key this cache made)."""
    try:
        return bytes.fromhex(key)
    except ValueError:
        return None
