"""Per-partition offset tracking for requests that finish out of order (parallel consumer).

A partition's committable position is its lowest offset still in flight, or one past the
highest offset seen when nothing is in flight: everything below it is done.

What lies above the position travels durably in the commit's metadata string (Confluent's
parallel-consumer does the same): the offsets already done there, so the next owner skips them
instead of crawling them again, and how many times each unfinished record has been delivered
to a worker that then died, so a record that keeps killing its worker is quarantined instead
of cycling through every replica. A record handed back on purpose (rebalance, shutdown) is
not counted against it.

A page record is charged one of two ways. Rendering beside other pages, its worker's death
cannot be told apart from its neighbours': it is only marked a *suspect* (`sus` in the
metadata). A suspect renders alone on its next worker, and only a death while it rendered
alone counts towards `poison`; so the innocent pages beside a killer end well.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from aiokafka import AIOKafkaConsumer, TopicPartition

METADATA_VERSION: Final = 1
"""Version of the commit-metadata encoding; other versions (or foreign metadata) are ignored."""

MAX_METADATA_CHARS: Final = 4000
"""Brokers refuse commit metadata above `offset.metadata.max.bytes` (4096 by default)."""


class Verdict(StrEnum):
    """What to do with a record that was just fetched."""

    RUN = "run"
    SKIP = "skip"
    """A previous owner finished it (it is above the committed position)."""
    POISON = "poison"
    """Delivered more than the allowed times: quarantine it instead of running it."""
    RUNNING = "running"
    """Fetched again while it still runs here (a re-fetch after a rebalance): ignore it."""


@dataclass(frozen=True, slots=True)
class Delivery:
    verdict: Verdict
    count: int
    """This delivery's number, 1 for the first (counting the deliveries charged to it)."""
    earlier: bool = False
    """The record was delivered before (to a worker that died, or that handed it back or
    was relieved of it): an earlier run of it may have left work behind."""
    suspect: bool = False
    """A worker died while it rendered beside others: it renders alone now, and a death
    then is counted against it."""


@dataclass(slots=True)
class _PartitionState:
    in_flight: set[int] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    """Finished offsets above the position (restored ones included)."""
    deliveries: dict[int, int] = field(default_factory=dict)
    """Unfinished offsets and how often each was delivered to a worker that did not finish it."""
    earlier: set[int] = field(default_factory=set)
    """Unfinished offsets delivered before without being charged (handed back, relieved)."""
    suspects: set[int] = field(default_factory=set)
    """Unfinished offsets whose worker died while they rendered beside others."""
    beside: set[int] = field(default_factory=set)
    """Unfinished offsets rendering beside others now (suspects if the worker dies)."""
    next_offset: int | None = None
    committed: tuple[int, str] | None = None

    def position(self) -> int | None:
        if self.in_flight:
            return min(self.in_flight)
        return self.next_offset

    def prune(self) -> None:
        position = self.position()
        if position is not None:
            self.done = {o for o in self.done if o >= position}


class OffsetTracker:
    """Which offsets of which partitions are taken, done, and safe to commit."""

    def __init__(self, max_deliveries: int = 3) -> None:
        self._max_deliveries = max_deliveries
        self._partitions: dict[TopicPartition, _PartitionState] = {}

    def restore(self, tp: TopicPartition, position: int | None, metadata: str) -> None:
        """Start owning `tp` from its committed position and the metadata stored with it."""
        state = _PartitionState()
        if position is not None and position >= 0:
            done, deliveries, earlier, suspects = decode_metadata(metadata, position)
            state.done, state.deliveries, state.earlier = done, deliveries, earlier
            state.suspects = suspects
            state.committed = (position, metadata)
        self._partitions[tp] = state

    def delivered(self, tp: TopicPartition, offset: int, *, charge: bool = True) -> Delivery:
        """Take a fetched record: run it, skip it (done before), or quarantine it.

        `charge`: count this delivery against the record now (committed before it runs);
        otherwise the caller charges it with `charge()` when the risky part begins (a page
        that starts rendering), so records that only waited are not counted."""
        state = self._partitions.setdefault(tp, _PartitionState())
        state.next_offset = max(offset + 1, state.next_offset or 0)
        if offset in state.done:
            return Delivery(Verdict.SKIP, 0)
        if offset in state.in_flight:
            return Delivery(Verdict.RUNNING, state.deliveries.get(offset, 0))
        charged = state.deliveries.get(offset, 0)
        earlier = charged > 0 or offset in state.earlier
        count = charged + 1
        if charge:
            state.deliveries[offset] = count
        state.in_flight.add(offset)
        verdict = Verdict.POISON if count > self._max_deliveries else Verdict.RUN
        suspect = offset in state.suspects
        return Delivery(verdict, count, earlier or suspect, suspect=suspect)

    def charge(self, tp: TopicPartition, offset: int, *, alone: bool = True) -> None:
        """Count the delivery of an unfinished record (taken with `charge=False`); one
        that renders beside others (not `alone`) is only a suspect if its worker dies."""
        state = self._partitions.get(tp)
        if state is None or offset not in state.in_flight:
            return
        if alone:
            state.deliveries[offset] = state.deliveries.get(offset, 0) + 1
        else:
            state.beside.add(offset)

    def relieve(self, tp: TopicPartition, offset: int) -> None:
        """Stop counting this delivery against an unfinished record: what it still does
        cannot kill the worker (a run that only waits for its pages). It stays marked as
        delivered before."""
        state = self._partitions.get(tp)
        if state is not None and offset in state.beside:
            state.beside.discard(offset)
            state.earlier.add(offset)
        elif state is not None and offset in state.in_flight:
            count = state.deliveries.get(offset, 0) - 1
            if count > 0:
                state.deliveries[offset] = count
            else:
                state.deliveries.pop(offset, None)
            state.earlier.add(offset)

    def finished(self, tp: TopicPartition, offset: int) -> None:
        state = self._partitions.get(tp)
        if state is not None and offset in state.in_flight:
            state.in_flight.discard(offset)
            state.deliveries.pop(offset, None)
            state.earlier.discard(offset)
            state.suspects.discard(offset)
            state.beside.discard(offset)
            state.done.add(offset)
            state.prune()

    def partitions(self) -> set[TopicPartition]:
        return set(self._partitions)

    def in_flight(self, tp: TopicPartition) -> int:
        state = self._partitions.get(tp)
        return len(state.in_flight) if state else 0

    def next_offset(self, tp: TopicPartition) -> int | None:
        """Where reading `tp` goes on: one past the highest offset taken."""
        state = self._partitions.get(tp)
        return state.next_offset if state else None

    def run_ahead(self, tp: TopicPartition, aside: Collection[int] = ()) -> int:
        """How far reading has gone past the oldest unfinished offset not in `aside`
        (records held apart, as pages waiting for their host's pace)."""
        state = self._partitions.get(tp)
        if state is None or state.next_offset is None:
            return 0
        unfinished = state.in_flight.difference(aside) if aside else state.in_flight
        if not unfinished:
            return 0
        return state.next_offset - min(unfinished)

    def committed_position(self, tp: TopicPartition) -> int | None:
        state = self._partitions.get(tp)
        return state.committed[0] if state and state.committed else None

    def to_commit(
        self, partitions: Iterable[TopicPartition], *, handing_back: bool = False
    ) -> dict[TopicPartition, tuple[int, str]]:
        """Positions and metadata that changed since the last commit, for `partitions` only.

        `handing_back`: the unfinished records are being given up on purpose (rebalance or
        shutdown), so this delivery is not counted against them.
        """
        commits: dict[TopicPartition, tuple[int, str]] = {}
        for tp in partitions:
            state = self._partitions.get(tp)
            position = state.position() if state else None
            if state is None or position is None:
                continue
            deliveries = dict(state.deliveries)
            earlier = set(state.earlier)
            suspects = state.suspects | state.beside
            if handing_back:
                for offset in state.in_flight:
                    if offset in deliveries and offset not in state.beside:
                        deliveries[offset] -= 1
                earlier |= state.in_flight
                suspects = set(state.suspects)
            metadata = encode_metadata(position, state.done, deliveries, earlier, suspects)
            commit = (position, metadata)
            if commit != state.committed:
                commits[tp] = commit
        return commits

    def committed(self, commits: dict[TopicPartition, tuple[int, str]]) -> None:
        for tp, commit in commits.items():
            if tp in self._partitions:
                self._partitions[tp].committed = commit

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop revoked partitions: their unfinished work belongs to the next owner."""
        for tp in partitions:
            self._partitions.pop(tp, None)


def encode_metadata(
    position: int,
    done: set[int],
    deliveries: dict[int, int],
    earlier: set[int] | None = None,
    suspects: set[int] | None = None,
) -> str:
    """Compact JSON: a bitset of done offsets from `position`, delivery counts (> 0), the
    unfinished offsets delivered before without a charge, and the suspects."""
    counts = sorted((o - position, n) for o, n in deliveries.items() if o >= position and n > 0)
    seen = sorted(o - position for o in earlier or () if o >= position)
    sus = sorted(o - position for o in suspects or () if o >= position)
    above = [o - position for o in done if o > position]
    document: dict[str, object] = {"v": METADATA_VERSION}
    if above:
        bits = bytearray(max(above) // 8 + 1)
        for index in above:
            bits[index // 8] |= 1 << (index % 8)
        document["done"] = base64.b64encode(bytes(bits)).decode()
    if counts:
        document["dlv"] = [list(pair) for pair in counts]
    if seen:
        document["seen"] = seen
    if sus:
        document["sus"] = sus
    text = json.dumps(document, separators=(",", ":"))
    for optional in ("done", "seen"):  # keep the counts: the rest saves work, no more
        if len(text) <= MAX_METADATA_CHARS:
            break
        document.pop(optional, None)
        text = json.dumps(document, separators=(",", ":"))
    return text[:MAX_METADATA_CHARS]


def decode_metadata(
    metadata: str, position: int
) -> tuple[set[int], dict[int, int], set[int], set[int]]:
    """The done offsets, delivery counts, offsets delivered before and suspects in
    `metadata`; nothing for foreign metadata."""
    try:
        document = json.loads(metadata) if metadata else {}
        if not isinstance(document, dict) or document.get("v") != METADATA_VERSION:
            return set(), {}, set(), set()
        bits = base64.b64decode(document.get("done", ""), validate=True)
        done = {
            position + byte * 8 + bit
            for byte, value in enumerate(bits)
            for bit in range(8)
            if value & (1 << bit)
        }
        deliveries = {position + int(delta): int(count) for delta, count in document.get("dlv", [])}
        earlier = {position + int(delta) for delta in document.get("seen", [])}
        suspects = {position + int(delta) for delta in document.get("sus", [])}
    except (ValueError, TypeError):
        return set(), {}, set(), set()
    return done, deliveries, earlier, suspects


async def committed_with_metadata(
    consumer: AIOKafkaConsumer, partitions: set[TopicPartition], timeout_s: float
) -> dict[TopicPartition, tuple[int | None, str]]:
    """The group's committed offsets of `partitions` with their metadata (aiokafka's
    `committed()` drops the metadata); None where nothing is committed."""
    coordinator = consumer._coordinator  # noqa: SLF001  # aiokafka has no public call
    found = await asyncio.wait_for(coordinator.fetch_committed_offsets(partitions), timeout_s)
    result: dict[TopicPartition, tuple[int | None, str]] = {}
    for tp in partitions:
        entry = found.get(tp)
        if entry is None or entry.offset < 0:
            result[tp] = (None, "")
        else:
            result[tp] = (entry.offset, entry.metadata or "")
    return result
