"""How long a partition without room is only held before it is paused in the client."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from aiokafka import TopicPartition

HOLD_S: Final = 2.0
"""How long a partition without room is only held (not read; the records the client fetched
ahead stay buffered) before it is paused in the client. A short hold ends with records at
hand; pausing at once would drop them and wait for a new fetch behind the broker's long poll
of the other partitions (up to `fetch_max_wait_ms`, 500 ms), which idled a fetcher of short
pages for most of each cycle. A long hold (memory, hung work) pauses, so nothing more is
fetched and the consumer keeps polling: it stays in its group."""


class Holds:
    """Partitions not read now, and since when: those held for `pause_after_s` are to be
    paused in the client (a shorter hold keeps the records fetched ahead)."""

    def __init__(self, pause_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._pause_after_s = pause_after_s
        self._clock = clock
        self._since: dict[TopicPartition, float] = {}

    def update(self, held: set[TopicPartition]) -> set[TopicPartition]:
        """`held` are held now (the others are not); returns those to pause."""
        now = self._clock()
        self._since = {tp: self._since.get(tp, now) for tp in held}
        return {tp for tp, since in self._since.items() if now - since >= self._pause_after_s}
