"""Which page partition each page key goes to: the host directory.

Hashing keys onto partitions spreads few hosts unevenly (25 hosts over 12 partitions landed
`[5,4,4,2,2,2,2,1,1,1,1,0]`), and with a few fetchers one of them gets half the pages. The
directory places each key on the least-loaded partition when a coordinator first meets it
and records that on `crawl.hosts` (one partition, keyed by page key). Every coordinator
reads the whole topic and follows it; the first record of a key is its placement for all,
because a single partition's order is the same for every reader. Two coordinators that
place one new key at once both wait for their own record to come back and then follow the
first one. Compaction keeps a key's last record, so a reader that sees the last record
contradict the first writes the first again (and the topic keeps records a day before
compacting them, plenty of time for that).

A placement is never moved: pages of a host stay on one fetcher's partition, and adding
page partitions later gives the new ones the next new hosts (a hash would move most).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final, Protocol, Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from pydantic import BaseModel, ConfigDict, ValidationError

from service.backoff import backoff_s
from service.errors import BrokerUnavailableError
from service.logs import get_logger
from service.messaging.closing import stop_consumer
from service.messaging.kafka_config import client_options
from service.messaging.polling import PollLoop, Waiters
from service.messaging.seal import Seal
from service.messaging.topics import partition_for

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import TracebackType

    from aiokafka import ConsumerRecord

    from service.messaging.publisher import Publisher
    from service.settings import Settings

log = get_logger(__name__)

RETRY_BASE_S: Final = 0.5
RETRY_MAX_S: Final = 30.0
"""Backoff between two tries of a placement the broker did not take (full jitter)."""

LOOP_RETRY_S: Final = 1.0
"""Pause after an unexpected error of a poll before the next one (a bug must not spin)."""


class Placement(BaseModel):
    """The value of a `crawl.hosts` record (its key is the page key)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    partition: int


class Placements:
    """The directory as read so far (pure): the first record of each key wins; records
    naming a partition the pages topic does not have are ignored."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._of: dict[str, int] = {}
        self._load = [0] * partitions
        self._contradicted: set[str] = set()

    def __len__(self) -> int:
        return len(self._of)

    def get(self, key: str) -> int | None:
        return self._of.get(key)

    def take(self, key: str, partition: int) -> bool:
        """Apply one record in log order; False when it names no partition of the topic."""
        if not 0 <= partition < self.partitions:
            return False
        first = self._of.get(key)
        if first is None:
            self._of[key] = partition
            self._load[partition] += 1
        elif first != partition:
            self._contradicted.add(key)  # the last record says otherwise: say it again
        else:
            self._contradicted.discard(key)
        return True

    def contradicted(self) -> dict[str, int]:
        """Keys whose last record contradicts their first, with the first (to write again);
        forgotten here (the rewrite, read back, would clear them anyway)."""
        found = {key: self._of[key] for key in self._contradicted}
        self._contradicted.clear()
        return found

    def choose(self, keys: Iterable[str]) -> dict[str, int]:
        """A partition for each unplaced key of `keys`: the least-loaded one, counting the
        keys chosen before it (ties: the lowest number, so a few hosts fill partitions
        0, 1, 2, ... which the assignor deals out to the fetchers in turn)."""
        load = list(self._load)
        chosen: dict[str, int] = {}
        for key in keys:
            if key in self._of or key in chosen:
                continue
            partition = min(range(self.partitions), key=load.__getitem__)
            chosen[key] = partition
            load[partition] += 1
        return chosen

    def spread(self) -> list[int]:
        """Keys placed on each partition."""
        return list(self._load)


class PagePartitions(Protocol):
    """Where a page key's tasks go (the coordinator's view; `HostDirectory` or `Hashed`)."""

    async def place(self, keys: Iterable[str]) -> None:
        """Make sure each of `keys` has a partition (may write to and read from Kafka)."""
        ...

    def partition(self, key: str) -> int | None:
        """The key's partition, None if it has none yet (`place` gives it one)."""
        ...


class Hashed:
    """`CRAWL_HOST_PLACEMENT=hash`: the key's murmur2 hash, as a producer would send it."""

    def __init__(self, partitions: int) -> None:
        self._partitions = partitions

    async def place(self, keys: Iterable[str]) -> None:
        del keys  # every key has its hash

    def partition(self, key: str) -> int | None:
        return partition_for(key, self._partitions)


class HostDirectory:
    """The coordinators' shared directory on `crawl.hosts`; an async context manager that
    returns once the topic is read to its end as of start, then follows it all the time."""

    def __init__(
        self,
        settings: Settings,
        publisher: Publisher,
        partitions: int,
        seal: Seal | None = None,
        *,
        client: Callable[..., AIOKafkaConsumer] = AIOKafkaConsumer,
    ) -> None:
        """`client` makes the Kafka consumer from its options (a test's stands in)."""
        self._topic = settings.hosts_topic
        self._seal = seal or Seal.from_settings(settings)
        """Only this deployment's authentic placements are followed."""
        self._publisher = publisher
        self._timeout_s = settings.kafka_timeout.total_seconds()
        self._placements = Placements(partitions)
        self._consumer = client(**client_options(settings), group_id=None, enable_auto_commit=False)
        self._partitions: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._progress = asyncio.Condition()
        """Notified after each poll, with `_positions` updated."""
        self._waiters = Waiters()
        self._placing = asyncio.Lock()
        """One batch of proposals at a time in this process (runs meeting one new host at
        once would each propose it)."""
        self._reading = PollLoop(self._poll, name="hosts", retry_s=LOOP_RETRY_S)
        self._skipped = 0
        self.rewrites = 0
        """First records written again because a later one contradicted them."""

    @property
    def placements(self) -> Placements:
        return self._placements

    async def __aenter__(self) -> Self:
        try:
            await asyncio.wait_for(self._consumer.start(), self._timeout_s)
            self._partitions = [TopicPartition(self._topic, 0)]
            self._consumer.assign(self._partitions)
            starts = await asyncio.wait_for(
                self._consumer.beginning_offsets(self._partitions), self._timeout_s
            )
            ends = await asyncio.wait_for(
                self._consumer.end_offsets(self._partitions), self._timeout_s
            )
            for tp, start in starts.items():
                self._consumer.seek(tp, start)  # not seek_to_beginning: it races the reset
        except (KafkaError, TimeoutError, OSError) as exc:
            await self._consumer.stop()
            raise BrokerUnavailableError(f"cannot read the host directory: {exc}") from exc
        self._reading.start()
        await self._until(ends)
        log.info(
            "hosts.read",
            keys=len(self._placements),
            skipped=self._skipped,
            spread=self._placements.spread(),
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._reading.stop()
        await stop_consumer(self._consumer, self._timeout_s)

    def partition(self, key: str) -> int | None:
        return self._placements.get(key)

    async def place(self, keys: Iterable[str]) -> None:
        """Place each new key of `keys`: write a proposal per key, wait until the directory
        is read past them, then every key has its first record's partition. Broker trouble
        is waited out (proposing again is harmless: the first record wins), as every other
        write of a run is; the run's cancel or deadline still stops it."""
        wanted = [key for key in keys if self._placements.get(key) is None]
        if not wanted:
            return
        async with self._placing:
            attempt = 0
            while chosen := self._placements.choose(wanted):
                try:
                    await self._write(chosen)
                except BrokerUnavailableError as exc:
                    wait_s = backoff_s(attempt, base_s=RETRY_BASE_S, max_s=RETRY_MAX_S)
                    log.warning("hosts.place_retrying", error=str(exc), wait_s=wait_s)
                    await asyncio.sleep(wait_s)
                    attempt += 1
                else:
                    return

    async def _write(self, placements: dict[str, int]) -> None:
        try:
            async with asyncio.timeout(self._timeout_s):
                deliveries = [
                    await self._publisher.send(*self._publisher.messages(self._topic, key, value))
                    for key, value in _values(placements).items()
                ]
                written = [await delivery for delivery in deliveries]
        except (KafkaError, TimeoutError) as exc:
            raise BrokerUnavailableError(f"cannot write to the host directory: {exc}") from exc
        last = max(meta.offset for meta in written)  # type: ignore[attr-defined]
        await self._until({self._partitions[0]: last + 1})

    async def _until(self, ends: dict[TopicPartition, int]) -> None:
        """Wait until each partition is read up to its offset in `ends`."""
        try:
            with self._waiters.waiting():
                async with asyncio.timeout(self._timeout_s), self._progress:
                    await self._progress.wait_for(
                        lambda: all(self._positions.get(tp, -1) >= end for tp, end in ends.items())
                    )
        except TimeoutError as exc:
            raise BrokerUnavailableError("the host directory was not read in time") from exc

    async def _poll(self) -> None:
        batch = await self._consumer.getmany(timeout_ms=self._waiters.poll_ms)
        for records in batch.values():
            for record in records:
                self._take(record)
        contradicted = self._placements.contradicted()
        if contradicted:
            # Two coordinators placed a new key at once (normal when several start together):
            # the first record is followed; writing it again keeps it past compaction.
            log.info("hosts.contradicted", keys=sorted(contradicted))
            for key, value in _values(contradicted).items():
                await self._publisher.send(*self._publisher.messages(self._topic, key, value))
                self.rewrites += 1
        for tp in self._partitions:
            self._positions[tp] = await asyncio.wait_for(
                self._consumer.position(tp), self._timeout_s
            )
        async with self._progress:
            self._progress.notify_all()

    def _take(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """One record, in order; one that cannot be read is skipped (logged, never fatal)."""
        if record.key is None or record.value is None:
            self._skip(record, "a directory record needs a key and a value")
            return
        if not self._seal.admits(self._topic, record.key, record.value, list(record.headers)):
            return
        try:
            key = record.key.decode()
            placement = Placement.model_validate_json(record.value)
        except (ValueError, ValidationError) as exc:
            self._skip(record, repr(exc))
            return
        if not self._placements.take(key, placement.partition):
            self._skip(record, f"partition {placement.partition} is not a page partition")

    def _skip(self, record: ConsumerRecord[bytes, bytes], why: str) -> None:
        self._skipped += 1
        log.warning("hosts.record_skipped", offset=record.offset, reason=why)


def _values(placements: dict[str, int]) -> dict[str, bytes]:
    return {
        key: Placement(partition=partition).model_dump_json().encode()
        for key, partition in placements.items()
    }
