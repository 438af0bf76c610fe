"""A run's bookkeeping of its pages, pure: which wait, which are dispatched, which are done.

Every admitted page is in exactly one state: waiting (in its page key's queue, in
admission order), dispatched (its task is with a fetcher, no outcome yet) or done (it was
counted once). The run asks for the next batch the window allows, tells the ledger which
pages were answered, and at a stop takes the pages that still need a result.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, KeysView

    from service.frontier.plan import Admitted


@dataclass(frozen=True, slots=True)
class Batch:
    """The pages one dispatch sends, each with its page key: to this process's fetcher
    (`local`), to the pages topic (`topic`); `lane_full` when pages of a key the local
    fetcher owns still wait for room in its backlog."""

    local: list[tuple[Admitted, str]]
    topic: list[tuple[Admitted, str]]
    lane_full: bool


class RunLedger:
    """The pages of one run by state; `key_of` gives a page URL's page key."""

    def __init__(self, key_of: Callable[[str], str]) -> None:
        self._key_of = key_of
        self._queues: dict[str, deque[Admitted]] = {}
        """Page key -> its waiting pages, in admission order (a page that finished
        meanwhile, by an earlier run, is skipped when its turn comes)."""
        self._waiting: dict[str, Admitted] = {}
        """Waiting pages by URL, in admission order."""
        self._dispatched: dict[str, str] = {}
        """Dispatched pages without an outcome yet -> their page key."""
        self._per_key: Counter[str] = Counter()
        """Dispatched and unanswered pages per page key (the window counts these)."""
        self._done: set[str] = set()

    @property
    def dispatched(self) -> int:
        return len(self._dispatched)

    @property
    def pending(self) -> bool:
        """Pages still wait or are dispatched without an outcome."""
        return bool(self._dispatched or self._waiting)

    def known(self, url: str) -> bool:
        """The page is done or dispatched (a replay found it)."""
        return url in self._done or url in self._dispatched

    def waiting_keys(self) -> KeysView[str]:
        """The page keys with pages waiting (each needs a partition before dispatch)."""
        return self._queues.keys()

    def has_waiting(self, key: str) -> bool:
        return key in self._queues

    def enqueue(self, pages: Iterable[Admitted]) -> None:
        for page in pages:
            self._waiting[page.url] = page
            self._queues.setdefault(self._key_of(page.url), deque()).append(page)

    def done_before(self, url: str) -> None:
        """An earlier run's page record counted the page (a replay)."""
        self._done.add(url)

    def dispatched_before(self, url: str) -> None:
        """An earlier run dispatched the page and it has no outcome yet (a replay)."""
        key = self._dispatched[url] = self._key_of(url)
        self._per_key[key] += 1

    def next_batch(
        self, window: int, *, owns: Callable[[str], bool] | None = None, room: int = 0
    ) -> Batch:
        """The waiting pages `window` (dispatched and unanswered per key) allows now, in
        order: those whose key `owns` (this process's fetcher) up to `room`, the rest for
        the topic. Each taken page is dispatched from here on."""
        local: list[tuple[Admitted, str]] = []
        topic: list[tuple[Admitted, str]] = []
        lane_full = False
        for key, queue in list(self._queues.items()):
            mine = owns is not None and owns(key)
            while queue and self._per_key[key] < window:
                if mine and room <= 0:
                    lane_full = True
                    break
                page = queue.popleft()
                if self._waiting.pop(page.url, None) is None:
                    continue  # finished meanwhile (an earlier run's page record)
                self._per_key[key] += 1
                self._dispatched[page.url] = key
                (local if mine else topic).append((page, key))
                room -= mine
            if not queue:
                del self._queues[key]
        return Batch(local=local, topic=topic, lane_full=lane_full)

    def answered(self, url: str) -> bool | None:
        """A page's outcome arrived. True: it is counted now (it was dispatched); False:
        counted now though it was still waiting (an earlier run's fetcher answered it);
        None: not a page to count (already done, or not in this run's plan)."""
        if url in self._done:
            return None
        key = self._dispatched.pop(url, None)
        if key is not None:
            self._per_key[key] -= 1
            self._done.add(url)
            return True
        if self._waiting.pop(url, None) is None:
            return None
        self._done.add(url)
        return False

    def give_up(self, admitted: Iterable[Admitted], *, dispatched: bool) -> list[Admitted]:
        """The pages that still need a result when the run stops: every waiting one (and,
        with `dispatched`, those no fetcher has answered), each marked done."""
        pages = list(self._waiting.values())
        self._waiting.clear()
        self._queues.clear()
        if dispatched:
            by_url = {page.url: page for page in admitted}
            pages += [by_url[url] for url in self._dispatched if url in by_url]
            self._dispatched.clear()
            self._per_key.clear()
        unanswered = [page for page in pages if page.url not in self._done]
        self._done.update(page.url for page in unanswered)
        return unanswered
