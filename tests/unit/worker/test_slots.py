"""Who gets the next free page slot: handed-back pages, then shares, then anyone; per host."""

from __future__ import annotations

from service.worker.fetcher._slots import PageTicket, SlotLimits, SlotQueue


def _queue(per_request: int = 2, per_host: int = 100) -> SlotQueue[str]:
    return SlotQueue(SlotLimits(per_request=per_request, per_host=per_host))


def _push(queue: SlotQueue[str], request: str, count: int, *, priority: int, host: str = "h"):
    ticket = PageTicket(run=request, priority=priority, host=host)
    return [queue.push(ticket, f"{request}{n}") for n in range(count)]


def _pop(queue: SlotQueue[str], count: int) -> list[str | None]:
    popped = [queue.pop() for _ in range(count)]
    return [entry.item if entry else None for entry in popped]


def test_one_request_alone_uses_every_free_slot():
    """Work-conserving: with nobody else waiting, a request starts pages beyond its share."""
    queue = _queue(per_request=2)
    _push(queue, "big", 100, priority=0)
    assert _pop(queue, 8) == [f"big{n}" for n in range(8)]
    assert (queue.running, queue.waiting) == (8, 92)


def test_a_later_request_goes_before_pages_beyond_an_older_requests_share():
    """A 1-page request taken after a big one that fills every slot gets the next free slot."""
    queue = _queue(per_request=2)
    big = _push(queue, "big", 100, priority=0)
    _pop(queue, 8)
    _push(queue, "small", 1, priority=1)
    queue.done(big[0].ticket)
    assert _pop(queue, 2) == ["small0", "big8"]


def test_within_their_share_older_requests_go_first():
    """Oldest first: a request below its share keeps the slot before a younger request."""
    queue = _queue(per_request=2)
    old = _push(queue, "old", 5, priority=0)
    _push(queue, "young", 5, priority=1)
    assert _pop(queue, 1) == ["old0"]
    assert _pop(queue, 1) == ["old1"]
    assert _pop(queue, 2) == ["young0", "young1"]
    queue.done(old[0].ticket)
    assert _pop(queue, 1) == ["old2"]
    assert _pop(queue, 1) == ["old3"]


def test_priority_orders_requests_not_the_order_they_queued_in():
    """A request with an earlier arrival number goes first even if its pages queued later."""
    queue = _queue(per_request=1)
    _push(queue, "later", 1, priority=5)
    _push(queue, "earlier", 1, priority=2)
    assert _pop(queue, 2) == ["earlier0", "later0"]


def test_a_page_whose_host_is_full_takes_no_slot_and_another_host_gets_it():
    """Per-host limit: an older request's page waits for its host without a slot; a younger
    request's page of another host starts; nothing starts when only the full host waits."""
    queue = _queue(per_request=4, per_host=2)
    _push(queue, "old", 4, priority=0, host="busy.example")
    _push(queue, "young", 1, priority=1, host="other.example")
    assert _pop(queue, 4) == ["old0", "old1", "young0", None]
    assert (queue.running, queue.waiting) == (3, 2)


def test_a_request_spanning_hosts_starts_its_oldest_page_of_a_free_host():
    """Within one request, a page of a free host goes before older pages of a full host."""
    queue = _queue(per_request=8, per_host=1)
    ticket_a = PageTicket(run="r", priority=0, host="a")
    ticket_b = PageTicket(run="r", priority=0, host="b")
    for item, ticket in (("a1", ticket_a), ("a2", ticket_a), ("b1", ticket_b)):
        queue.push(ticket, item)
    assert _pop(queue, 3) == ["a1", "b1", None]
    queue.done(ticket_a)
    assert _pop(queue, 1) == ["a2"]


def test_handed_back_pages_go_first_even_beyond_their_share():
    """A shed page runs again before every other waiting page, oldest request first."""
    queue = _queue(per_request=1)
    first = _push(queue, "a", 1, priority=0)
    _push(queue, "b", 2, priority=1)
    _pop(queue, 1)
    queue.push(first[0].ticket, "a0-again", handed_back=True)
    queue.done(first[0].ticket)
    queue.push(PageTicket(run="b", priority=1, host="h"), "b-again", handed_back=True)
    assert _pop(queue, 3) == ["a0-again", "b-again", "b0"]


def test_overtakable_pages_are_those_of_requests_rendering_more_than_their_share():
    """A request taken now would start before the waiting pages of a request rendering more
    than its share, not before those of a request at or below it (its next page goes first
    as soon as one of its pages ends)."""
    queue = _queue(per_request=2)
    big = _push(queue, "big", 100, priority=0)
    assert queue.overtakable == 0
    _pop(queue, 2)
    assert queue.overtakable == 0
    _pop(queue, 1)
    assert queue.overtakable == 97
    _pop(queue, 5)
    assert queue.overtakable == 92
    _push(queue, "small", 3, priority=1)
    assert queue.overtakable == 92
    for entry in big[:6]:
        queue.done(entry.ticket)
    assert queue.overtakable == 0


def test_removed_and_finished_pages_leave_nothing_behind():
    """A cancelled waiter is forgotten (twice is harmless), and once every page has ended no
    request or host is tracked any more."""
    queue = _queue(per_request=1, per_host=1)
    waiting = _push(queue, "a", 3, priority=0) + _push(queue, "b", 1, priority=1, host="g")
    queue.remove(waiting[1])
    queue.remove(waiting[1])
    started = [queue.pop() for _ in range(2)]
    assert [entry.item for entry in started if entry] == ["a0", "b0"]
    queue.remove(started[0])  # already started: nothing to forget
    for entry in started:
        assert entry is not None
        queue.done(entry.ticket)
    third = queue.pop()
    assert third is not None
    assert third.item == "a2"
    queue.done(third.ticket)
    assert (queue.running, queue.waiting, queue.tracked) == (0, 0, 0)


def test_a_suspect_waits_for_every_page_to_end_then_renders_alone():
    """A page that must render alone stops new pages from starting, starts once nothing
    runs, and nothing starts beside it until it ends."""
    queue = _queue(per_request=8)
    running = _push(queue, "a", 3, priority=0)
    assert _pop(queue, 2) == ["a0", "a1"]
    suspect = queue.push(PageTicket(run="s", priority=5, host="x", alone=True), "s0")
    assert _pop(queue, 1) == [None]  # a2 waits: the suspect goes first
    assert not queue.startable
    queue.done(running[0].ticket)
    assert _pop(queue, 1) == [None]  # a1 still runs
    queue.done(running[1].ticket)
    assert queue.startable
    assert _pop(queue, 2) == ["s0", None]  # alone
    queue.done(suspect.ticket)
    assert _pop(queue, 1) == ["a2"]
