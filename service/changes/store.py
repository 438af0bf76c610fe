"""`KafkaHistoryStore`: the histories of the page partitions a fetcher looks up, on Kafka.

Per partition looked up, it holds the newest observation of each key (hash, fetch time,
offset), read from the history topic's headers and caught up at most every `CATCH_UP_S`;
it reads a record's value (the Markdown) by its offset only when a diff needs it.
Compaction never moves offsets, and it always keeps a key's newest record.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Self

import cramjam
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from service.changes.compare import History, Observation
from service.changes.history import HistoryRecord
from service.logs import get_logger
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.publisher import Message

if TYPE_CHECKING:
    from types import TracebackType

    from aiokafka import ConsumerRecord

    from service.messaging.publisher import Publisher
    from service.settings import Settings

log = get_logger(__name__)

CATCH_UP_S: Final = 1.0
"""How stale this fetcher's copy of a partition's histories may be (see the page cache's)."""

POLL_TIMEOUT_MS: Final = 200
"""How long one fetch of history records waits."""

SHA_HEADER: Final = "crawlstream-sha256"
"""The observation's hash (empty: the page was gone)."""

FETCHED_HEADER: Final = "crawlstream-fetched-at"
"""When the observation was fetched, seconds since the epoch."""

RESULT_HEADER: Final = "crawlstream-result-id"
"""The result that made the observation."""

BEFORE_SHA_HEADER: Final = "crawlstream-before-sha256"
BEFORE_FETCHED_HEADER: Final = "crawlstream-before-fetched-at"
"""The observation it was compared with (absent when there was none)."""

RECORD_OVERHEAD_BYTES: Final = 4096
"""Room left in a Kafka message beside a record's compressed bytes and headers."""


def _observation(digest: bytes | None, fetched_at: float) -> Observation:
    return Observation(
        fetched_at=datetime.fromtimestamp(fetched_at, UTC),
        sha256=None if digest is None else digest.hex(),
    )


class _Slot:
    """One key's newest observation, and the one before it, as held in memory."""

    __slots__ = ("before", "digest", "fetched_at", "offset", "result_id")

    def __init__(
        self,
        *,
        digest: bytes | None,
        fetched_at: float,
        offset: int,
        result_id: str,
        before: tuple[bytes | None, float] | None,
    ) -> None:
        self.digest = digest
        self.fetched_at = fetched_at
        self.offset = offset
        self.result_id = result_id
        self.before = before

    def history(self) -> History:
        before = None if self.before is None else _observation(*self.before)
        return History(
            latest=_observation(self.digest, self.fetched_at),
            result_id=self.result_id,
            before=before,
        )


def encode_record(record: HistoryRecord) -> bytes:
    return bytes(cramjam.zstd.compress(record.model_dump_json().encode()))


def decode_record(raw: bytes) -> HistoryRecord:
    return HistoryRecord.model_validate_json(bytes(cramjam.zstd.decompress(raw)))


def record_headers(record: HistoryRecord) -> list[tuple[str, bytes]]:
    headers = [
        (SHA_HEADER, (record.sha256 or "").encode()),
        (FETCHED_HEADER, repr(record.fetched_at.timestamp()).encode()),
        (RESULT_HEADER, record.result_id.encode()),
    ]
    if record.before is not None:
        headers += [
            (BEFORE_SHA_HEADER, (record.before.sha256 or "").encode()),
            (BEFORE_FETCHED_HEADER, repr(record.before.fetched_at.timestamp()).encode()),
        ]
    return headers


def slot_of(headers: dict[str, bytes], offset: int) -> _Slot:
    """The slot a record's headers describe; KeyError or ValueError when they do not."""
    before = None
    if BEFORE_SHA_HEADER in headers:
        sha = headers[BEFORE_SHA_HEADER].decode()
        before = (bytes.fromhex(sha) if sha else None, float(headers[BEFORE_FETCHED_HEADER]))
    sha = headers[SHA_HEADER].decode()
    return _Slot(
        digest=bytes.fromhex(sha) if sha else None,
        fetched_at=float(headers[FETCHED_HEADER]),
        offset=offset,
        result_id=headers[RESULT_HEADER].decode(),
        before=before,
    )


def _without_markdown(record: HistoryRecord) -> HistoryRecord:
    before = record.before
    if before is not None:
        before = before.model_copy(update={"markdown": None})
    return record.model_copy(update={"markdown": None, "before": before})


class KafkaHistoryStore:
    """`async with KafkaHistoryStore(settings, publisher) as store:` the fetcher's histories."""

    def __init__(self, settings: Settings, publisher: Publisher) -> None:
        self._publisher = publisher
        self._topic = settings.change_history_topic
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._max_value = int(settings.max_message_bytes) - RECORD_OVERHEAD_BYTES
        fetch_bytes = int(settings.max_message_bytes) + 65_536
        options = {
            **client_options(settings),
            "group_id": None,
            "enable_auto_commit": False,
            # A start that retention deleted reads from the first record kept, not the end.
            "auto_offset_reset": "earliest",
            "max_partition_fetch_bytes": fetch_bytes,
            "fetch_max_bytes": fetch_bytes,
        }
        self._index = AIOKafkaConsumer(**options)
        self._values = AIOKafkaConsumer(**options)
        self._slots: dict[int, dict[bytes, _Slot]] = {}
        self._positions: dict[int, int] = {}
        self._caught_up: dict[int, float] = {}
        self._index_lock = asyncio.Lock()
        self._value_lock = asyncio.Lock()

    async def __aenter__(self) -> Self:
        async with asyncio.timeout(self._timeout_s):
            await self._index.start()
            await self._values.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await stop_consumer(self._index, self._timeout_s)
        await stop_consumer(self._values, self._timeout_s)

    async def find(self, partition: int, key: str) -> History | None:
        await self._catch_up(partition)
        slot = self._slots.get(partition, {}).get(bytes.fromhex(key))
        return None if slot is None else slot.history()

    async def markdown(self, partition: int, key: str, *, before: bool = False) -> str | None:
        slot = self._slots.get(partition, {}).get(bytes.fromhex(key))
        if slot is None:
            return None
        record = await self._read(partition, key, slot.offset)
        if record is None:
            return None
        if before:
            return None if record.before is None else record.before.markdown
        return record.markdown

    async def _read(self, partition: int, key: str, offset: int) -> HistoryRecord | None:
        """The record at `offset`, if it is still the one of `key` there."""
        tp = TopicPartition(self._topic, partition)
        async with self._value_lock, asyncio.timeout(self._timeout_s):
            self._values.assign([tp])
            end = (await self._values.end_offsets([tp]))[tp]
            if offset >= end:
                return None  # the topic was recreated or cut back
            self._values.seek(tp, offset)
            while True:
                batch = await self._values.getmany(tp, timeout_ms=POLL_TIMEOUT_MS, max_records=1)
                for record in batch.get(tp, []):
                    return self._record_of(record, key, offset)

    async def put(self, partition: int, record: HistoryRecord) -> None:
        value = encode_record(record)
        if len(value) > self._max_value:  # kept without its Markdowns: no diff next time
            value = encode_record(_without_markdown(record))
        message = Message(
            self._topic,
            record.key.encode(),
            value,
            record_headers(record),
            partition=partition,
        )
        written = await asyncio.wait_for(await self._publisher.send(message), self._timeout_s)
        offset = getattr(written, "offset", None)
        if isinstance(offset, int):
            slot = slot_of(dict(message.headers), offset)
            self._slots.setdefault(partition, {})[bytes.fromhex(record.key)] = slot

    async def _catch_up(self, partition: int) -> None:
        """Read what the partition got since the last look (all of it the first time)."""
        if time.monotonic() - self._caught_up.get(partition, -CATCH_UP_S) < CATCH_UP_S:
            return
        tp = TopicPartition(self._topic, partition)
        async with self._index_lock:
            if partition not in self._positions:
                self._follow(partition)
            async with asyncio.timeout(self._timeout_s):
                end = (await self._index.end_offsets([tp]))[tp]
            while await self._index.position(tp) < end:
                async with asyncio.timeout(self._timeout_s):  # per fetch: a takeover reads on
                    batch = await self._index.getmany(tp, timeout_ms=POLL_TIMEOUT_MS)
                for record in batch.get(tp, []):
                    self._apply(partition, record)
                self._positions[partition] = await self._index.position(tp)
            self._caught_up[partition] = time.monotonic()

    def _follow(self, partition: int) -> None:
        """Add `partition` to the index consumer, keeping the others' positions."""
        self._positions[partition] = 0
        self._slots.setdefault(partition, {})
        tps = {TopicPartition(self._topic, p): at for p, at in self._positions.items()}
        self._index.assign(list(tps))
        for tp, at in tps.items():
            self._index.seek(tp, at)

    def _apply(self, partition: int, record: ConsumerRecord[bytes, bytes]) -> None:
        slots = self._slots[partition]
        try:
            key = bytes.fromhex((record.key or b"").decode())
        except ValueError:
            log.warning("changes.history_unreadable", partition=partition, error="bad key")
            return
        if not record.value:  # a tombstone
            slots.pop(key, None)
            return
        try:
            slots[key] = slot_of(dict(record.headers), record.offset)
        except (KeyError, ValueError) as exc:
            log.warning("changes.history_unreadable", partition=partition, error=repr(exc))

    def _record_of(
        self, record: ConsumerRecord[bytes, bytes], key: str, offset: int
    ) -> HistoryRecord | None:
        if record.offset != offset or not record.value:
            return None  # compacted away: a newer record of the key replaced it
        try:
            history = decode_record(record.value)
        except (ValidationError, cramjam.DecompressionError) as exc:
            log.warning("changes.history_unreadable", offset=offset, error=str(exc)[:200])
            return None
        return history if history.key == key else None
