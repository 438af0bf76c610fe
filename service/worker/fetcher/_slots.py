"""Which waiting page gets the next free page slot: pure policy, no asyncio, no clock.

A free slot goes to, in this order:

1. a page handed back at critical memory (shed), oldest request first;
2. a page of a request rendering fewer than its share (`per_request`), oldest request first;
3. any waiting page, oldest request first: a slot nobody within their share can use goes to
   a request beyond its share (work-conserving), so one big request never leaves slots idle.

So a request taken later still starts before an older request's pages beyond its share, and
the waiting pages of a request rendering beyond its share do not hold up intake (see
`overtakable`). When the gate allows no more pages than the older requests' shares, requests
run oldest first, one share after another. A page whose host already renders
`per_host` pages waits without a slot, and the slot goes to a page of another host. Requests
and hosts with nothing waiting or running leave nothing behind.

A page that must render alone (a suspect: a worker died while it rendered beside others)
goes before all of these: while one waits, no other page starts; it starts once nothing
runs, and nothing starts beside it until it ends.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Self, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterable

    from service.settings import Settings

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotLimits:
    """Pages rendered at once per request (its share) and per host."""

    per_request: int
    per_host: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        return cls(per_request=settings.max_pages_per_request, per_host=settings.max_pages_per_host)


@dataclass(frozen=True, slots=True, kw_only=True)
class PageTicket:
    """Who a page belongs to: its run, that run's arrival number (priority), its host."""

    run: str
    priority: int
    host: str
    alone: bool = False
    """The page renders with no other page running (a suspect)."""


@dataclass(slots=True, eq=False, kw_only=True)
class Waiting(Generic[T]):
    """One waiting page: its ticket and what the caller waits on (`item`)."""

    ticket: PageTicket
    item: T
    order: int
    handed_back: bool
    queued: bool = True


@dataclass(slots=True, eq=False)
class _Lane(Generic[T]):
    """The waiting pages of one request, per host, each host's in arrival order."""

    priority: int
    opened: int
    by_host: dict[str, deque[Waiting[T]]] = field(default_factory=dict)
    waiting: int = 0


class SlotQueue(Generic[T]):
    """Waiting pages and the running counts per request and host."""

    def __init__(self, limits: SlotLimits) -> None:
        self.limits = limits
        self._lanes: dict[str, _Lane[T]] = {}
        self._handed_back: list[Waiting[T]] = []
        self._alone: list[Waiting[T]] = []
        """Pages waiting to render alone, in arrival order."""
        self._alone_running = 0
        self._by_request: Counter[str] = Counter()
        self._by_host: Counter[str] = Counter()
        self._orders = 0

    @property
    def running(self) -> int:
        return self._by_request.total()

    @property
    def waiting(self) -> int:
        lanes = sum(lane.waiting for lane in self._lanes.values())
        return len(self._handed_back) + len(self._alone) + lanes

    @property
    def overtakable(self) -> int:
        """Waiting pages a request taken now would start before: those of requests rendering
        more than their share. A request rendering its share or less is back below it when
        one of its pages ends, and then its next page goes first, as the older request's."""
        return sum(
            lane.waiting
            for request, lane in self._lanes.items()
            if self._by_request[request] > self.limits.per_request
        )

    @property
    def tracked(self) -> int:
        """Requests and hosts with state kept now; zero once nothing waits or runs."""
        return len(self._lanes) + len(self._by_request) + len(self._by_host)

    def push(self, ticket: PageTicket, item: T, *, handed_back: bool = False) -> Waiting[T]:
        self._orders += 1
        entry = Waiting(ticket=ticket, item=item, order=self._orders, handed_back=handed_back)
        if ticket.alone:
            self._alone.append(entry)
            return entry
        if handed_back:
            self._handed_back.append(entry)
            return entry
        lane = self._lanes.get(ticket.run)
        if lane is None:
            lane = self._lanes[ticket.run] = _Lane(ticket.priority, self._orders)
        lane.by_host.setdefault(ticket.host, deque()).append(entry)
        lane.waiting += 1
        return entry

    def remove(self, entry: Waiting[T]) -> None:
        """Forget a page that stopped waiting (its caller was cancelled), if still queued."""
        if not entry.queued:
            return
        entry.queued = False
        if entry.ticket.alone:
            self._alone.remove(entry)
            return
        if entry.handed_back:
            self._handed_back.remove(entry)
            return
        lane = self._lanes[entry.ticket.run]
        lane.by_host[entry.ticket.host].remove(entry)
        self._forget(lane, entry)

    def pop(self) -> Waiting[T] | None:
        """The page that gets a free slot now (counted as running), or None if none may start."""
        if self._alone_running or self._alone:
            return self._pop_alone()
        entry = self._first_handed_back() or self._first(share=True) or self._first(share=False)
        if entry is None:
            return None
        entry.queued = False
        if entry.handed_back:
            self._handed_back.remove(entry)
        else:
            lane = self._lanes[entry.ticket.run]
            lane.by_host[entry.ticket.host].popleft()
            self._forget(lane, entry)
        self._by_request[entry.ticket.run] += 1
        self._by_host[entry.ticket.host] += 1
        return entry

    def _pop_alone(self) -> Waiting[T] | None:
        """The first page waiting to render alone, once nothing runs (None meanwhile)."""
        if self._alone_running or self.running or not self._alone:
            return None
        entry = self._alone.pop(0)
        entry.queued = False
        self._alone_running += 1
        self._by_request[entry.ticket.run] += 1
        self._by_host[entry.ticket.host] += 1
        return entry

    @property
    def startable(self) -> bool:
        """A waiting page could take a free slot now (its host has room); memory aside."""
        if self._alone_running or self._alone:
            return bool(self._alone) and not self._alone_running and not self.running
        return (self._first_handed_back() or self._first(share=False)) is not None

    def done(self, ticket: PageTicket) -> None:
        """A page that was popped stopped running."""
        if ticket.alone:
            self._alone_running -= 1
        for counter, key in ((self._by_request, ticket.run), (self._by_host, ticket.host)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]

    def _first_handed_back(self) -> Waiting[T] | None:
        ready = [entry for entry in self._handed_back if self._host_free(entry.ticket.host)]
        return min(ready, key=lambda e: (e.ticket.priority, e.order), default=None)

    def _first(self, *, share: bool) -> Waiting[T] | None:
        """The oldest request's first page whose host is free; with `share`, only requests
        below their share."""
        for request, lane in sorted(self._lanes.items(), key=lambda kv: _lane_key(kv[1])):
            if share and self._share_left(request) <= 0:
                continue
            heads = (queue[0] for host, queue in lane.by_host.items() if self._host_free(host))
            first = _oldest(heads)
            if first is not None:
                return first
        return None

    def _share_left(self, request: str) -> int:
        return max(self.limits.per_request - self._by_request[request], 0)

    def _host_free(self, host: str) -> bool:
        return self._by_host[host] < self.limits.per_host

    def _forget(self, lane: _Lane[T], entry: Waiting[T]) -> None:
        lane.waiting -= 1
        host, request = entry.ticket.host, entry.ticket.run
        if not lane.by_host[host]:
            del lane.by_host[host]
        if not lane.by_host:
            del self._lanes[request]


def _lane_key(lane: _Lane[T]) -> tuple[int, int]:
    return (lane.priority, lane.opened)


def _oldest(entries: Iterable[Waiting[T]]) -> Waiting[T] | None:
    return min(entries, key=lambda entry: entry.order, default=None)
