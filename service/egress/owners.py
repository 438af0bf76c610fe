"""Whose the egress proxy's connections are, and which to close so one owner cannot starve
the others.

Pure bookkeeping: an owner is the user name of the credential a connection authenticated
with (each browser context has its own, the worker's own clients share one). Two rules:

- an owner holds at most `per_owner` connections: its next one costs it its least recently
  active one (a hanging fetch, an idle WebSocket or tunnel), not a newcomer's chance;
- when the proxy is full, a newcomer costs the owner holding the most its least recently
  active connection, if that owner holds more than its fair share (`capacity` split evenly
  between the owners and the newcomer); otherwise the newcomer is refused.

Owners in `exempt` (the worker's own clients, which bound themselves) have no `per_owner`
limit but can lose connections when they hold the most.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterable

DEFAULT_PER_OWNER: Final = 64
"""Connections one browser context may hold at once (`CRAWL_EGRESS_CONNECTIONS_PER_CONTEXT`):
Chromium's own limits are 32 connections and 32 WebSockets to one proxy per context; a page
that opens more waits for its own, not for everyone's."""


class Held(Protocol):
    """An open connection, as far as choosing one to close goes."""

    @property
    def last_active(self) -> float:
        """When it last moved a byte (any monotonic clock, the same for all)."""
        ...


C = TypeVar("C", bound="Held")


@dataclass(slots=True, kw_only=True)
class ConnectionOwners(Generic[C]):
    """The owner of each attributed connection; picks the connection to evict."""

    capacity: int
    per_owner: int = DEFAULT_PER_OWNER
    exempt: frozenset[str] = frozenset()
    evicted_total: int = 0
    """Connections chosen for eviction since start."""
    _owner_of: dict[C, str] = field(default_factory=dict, repr=False)
    _held: dict[str, set[C]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.per_owner < 1:
            raise ValueError("an owner must be allowed at least one connection")

    def held(self, owner: str) -> int:
        """Connections `owner` holds now."""
        return len(self._held.get(owner, ()))

    def of(self, owner: str) -> list[C]:
        """The connections `owner` holds now."""
        return list(self._held.get(owner, ()))

    def attribute(self, connection: C, owner: str) -> C | None:
        """Count `connection` for `owner`; the owner's connection to evict (its least recently
        active other one) when that makes more than `per_owner`, else None."""
        self._owner_of[connection] = owner
        mine = self._held.setdefault(owner, set())
        mine.add(connection)
        if owner in self.exempt or len(mine) <= self.per_owner:
            return None
        return self._evict(_least_active(held for held in mine if held is not connection))

    def victim_for_newcomer(self) -> C | None:
        """When the proxy is full: the connection to evict for a newcomer (the least recently
        active one of the owner holding the most, when it holds more than its fair share),
        or None: refuse the newcomer."""
        if not self._held:
            return None
        mine = max(self._held.values(), key=len)
        fair_share = self.capacity // (len(self._held) + 1)
        if len(mine) <= max(1, fair_share):
            return None
        return self._evict(_least_active(mine))

    def forget(self, connection: C) -> None:
        """The connection ended (or was evicted): it is nobody's any more."""
        owner = self._owner_of.pop(connection, None)
        if owner is None:
            return
        mine = self._held[owner]
        mine.discard(connection)
        if not mine:
            del self._held[owner]

    def _evict(self, connection: C | None) -> C | None:
        if connection is not None:
            self.forget(connection)
            self.evicted_total += 1
        return connection


def _least_active(connections: Iterable[C]) -> C | None:
    return min(connections, key=lambda held: held.last_active, default=None)
