"""The page cache's entries, as the fetchers see them: an interface and its Kafka version.

`KafkaCacheStore` keeps, per page partition this fetcher has looked up, the newest index
record of each key (read from the compacted index topic, caught up at most every
`CATCH_UP_S`), and reads a body record by its offset when an entry answers. It writes an
entry as its body, then its index record pointing at the body's offset.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Protocol, Self

import cramjam
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from service.cache.records import CacheIndexRecord, StoredPage
from service.logs import get_logger
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.publisher import Message
from service.messaging.seal import Seal

if TYPE_CHECKING:
    from types import TracebackType

    from aiokafka import ConsumerRecord

    from service.messaging.publisher import Publisher
    from service.settings import Settings

log = get_logger(__name__)

CATCH_UP_S: Final = 1.0
"""How stale this fetcher's copy of a partition's index may be: a lookup at most this long
after the last one reads what other fetchers wrote since (an entry written by a former
owner of the partition, or by this one's other lookups)."""

POLL_TIMEOUT_MS: Final = 200
"""How long one fetch of index or body records waits."""

BODY_OVERHEAD_BYTES: Final = 4096
"""Room left in a Kafka message beside a stored page's compressed bytes."""


class CacheStore(Protocol):
    """Where a fetcher finds and keeps cache entries, by page partition."""

    async def find(self, partition: int, key: str) -> CacheIndexRecord | None: ...
    async def body(self, partition: int, entry: CacheIndexRecord) -> StoredPage | None: ...
    async def put(self, partition: int, page: StoredPage, entry: CacheIndexRecord) -> bool: ...
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
        # "earliest": once retention has deleted a partition's first records, a seek to
        # offset 0 is out of range and must land on the oldest record kept, not the end
        self._index = AIOKafkaConsumer(
            **client_options(settings),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self._bodies = AIOKafkaConsumer(
            **client_options(settings),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=fetch_bytes,
            fetch_max_bytes=fetch_bytes,
        )
        self._entries: dict[int, dict[bytes, IndexSlot]] = {}
        self._positions: dict[int, int] = {}
        self._caught_up: dict[int, float] = {}
        self._index_lock = asyncio.Lock()
        self._body_lock = asyncio.Lock()
        self._recent = RecentPages(int(settings.cache_memory_bytes))

    @property
    def entries(self) -> int:
        """Index entries held here, over every partition read."""
        return sum(map(len, self._entries.values()))

    async def __aenter__(self) -> Self:
        async with asyncio.timeout(self._timeout_s):
            await self._index.start()
            await self._bodies.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await stop_consumer(self._index, self._timeout_s)
        await stop_consumer(self._bodies, self._timeout_s)

    async def find(self, partition: int, key: str) -> CacheIndexRecord | None:
        await self._catch_up(partition)
        raw = _raw_key(key)
        slot = self._entries.get(partition, {}).get(raw) if raw is not None else None
        return None if slot is None else slot.record(raw or b"")

    async def body(self, partition: int, entry: CacheIndexRecord) -> StoredPage | None:
        held = self._recent.get((partition, entry.body_offset))
        if held is not None:
            return held
        page = await self._read_body(partition, entry)
        if page is not None:
            self._recent.put((partition, entry.body_offset), page)
        return page

    async def _read_body(self, partition: int, entry: CacheIndexRecord) -> StoredPage | None:
        tp = TopicPartition(self._bodies_topic, partition)
        async with self._body_lock, asyncio.timeout(self._timeout_s):
            self._bodies.assign([tp])
            end = (await self._bodies.end_offsets([tp]))[tp]
            if entry.body_offset >= end:
                return None  # the topic was recreated or cut back: the entry points nowhere
            self._bodies.seek(tp, entry.body_offset)
            while True:
                batch = await self._bodies.getmany(tp, timeout_ms=POLL_TIMEOUT_MS, max_records=1)
                for record in batch.get(tp, []):
                    return self._page_of(record, entry)

    async def put(self, partition: int, page: StoredPage, entry: CacheIndexRecord) -> bool:
        """Write `page`, then `entry` pointing at it; False when the page is too large."""
        raw = encode_page(page)
        if len(raw) > self._max_body:
            return False
        key = entry.key.encode()
        headers = self._seal.headers(self._bodies_topic, key, raw)
        delivery = await self._publisher.send(
            Message(self._bodies_topic, key, raw, headers, partition=partition)
        )
        written = await asyncio.wait_for(delivery, self._timeout_s)
        offset = getattr(written, "offset", None)
        if not isinstance(offset, int):
            return False
        self._recent.put((partition, offset), page)
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
            self._entries.setdefault(partition, {})[raw] = IndexSlot(entry)

    async def _catch_up(self, partition: int) -> None:
        """Read what the index partition got since the last look (all of it the first time)."""
        if time.monotonic() - self._caught_up.get(partition, -CATCH_UP_S) < CATCH_UP_S:
            return
        tp = TopicPartition(self._index_topic, partition)
        async with self._index_lock:
            if partition not in self._positions:
                self._follow(partition)
            async with asyncio.timeout(self._timeout_s):
                end = (await self._index.end_offsets([tp]))[tp]
            while await self._index.position(tp) < end:
                # A deadline per fetch, not for the whole read: a large partition taken
                # over is read for as long as its records keep coming.
                async with asyncio.timeout(self._timeout_s):
                    batch = await self._index.getmany(tp, timeout_ms=POLL_TIMEOUT_MS)
                for record in batch.get(tp, []):
                    self._apply(partition, record)
                self._positions[partition] = await self._index.position(tp)
            self._caught_up[partition] = time.monotonic()

    def _follow(self, partition: int) -> None:
        """Add `partition` to the index consumer, keeping the others' positions."""
        self._positions[partition] = 0
        self._entries.setdefault(partition, {})
        tps = {TopicPartition(self._index_topic, p): at for p, at in self._positions.items()}
        self._index.assign(list(tps))
        for tp, at in tps.items():
            self._index.seek(tp, at)

    def _apply(self, partition: int, record: ConsumerRecord[bytes, bytes]) -> None:
        entries = self._entries[partition]
        raw = _raw_key((record.key or b"").decode(errors="replace"))
        if raw is None:
            log.warning("cache.index_unreadable", partition=partition, error="not a cache key")
            return
        if not record.value:  # a purge's tombstone
            entries.pop(raw, None)
            return
        if not self._seal.admits(self._index_topic, record.key, record.value, record.headers):
            return
        try:
            entry = CacheIndexRecord.model_validate_json(record.value)
        except ValidationError as exc:
            log.warning("cache.index_unreadable", partition=partition, error=str(exc)[:200])
            return
        entries[raw] = IndexSlot(entry)

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
