"""The run ledger: every admitted page waiting, dispatched or done, exactly once (pure)."""

from __future__ import annotations

from service.frontier.plan import Admitted
from service.worker.coordinator.ledger import RunLedger


def page(url: str) -> Admitted:
    return Admitted(url=url, depth=0, parent_url=None)


def host_of(url: str) -> str:
    return url.split("/")[2]


def ledger_of(*urls: str) -> RunLedger:
    ledger = RunLedger(host_of)
    ledger.enqueue(page(url) for url in urls)
    return ledger


def urls(pairs: list[tuple[Admitted, str]]) -> list[str]:
    return [admitted.url for admitted, _ in pairs]


def test_the_window_limits_dispatched_pages_per_key_in_admission_order():
    ledger = ledger_of("https://a/1", "https://a/2", "https://a/3", "https://b/1")
    first = ledger.next_batch(2)
    assert urls(first.topic) == ["https://a/1", "https://a/2", "https://b/1"]
    assert ledger.next_batch(2).topic == []  # a's window is full
    assert ledger.answered("https://a/1") is True
    assert urls(ledger.next_batch(2).topic) == ["https://a/3"]
    assert ledger.dispatched == 3


def test_pages_of_keys_the_local_fetcher_owns_take_its_room_and_then_wait():
    ledger = ledger_of("https://a/1", "https://a/2", "https://b/1")
    batch = ledger.next_batch(8, owns=lambda key: key == "a", room=1)
    assert urls(batch.local) == ["https://a/1"]
    assert urls(batch.topic) == ["https://b/1"]
    assert batch.lane_full
    assert ledger.has_waiting("a")
    assert not ledger.has_waiting("b")
    assert list(ledger.waiting_keys()) == ["a"]


def test_an_outcome_counts_a_page_once_and_only_a_page_of_the_plan():
    ledger = ledger_of("https://a/1", "https://a/2")
    ledger.next_batch(1)
    assert ledger.answered("https://a/1") is True
    assert ledger.answered("https://a/1") is None  # a second record of the same page
    assert ledger.answered("https://a/2") is False  # an earlier run's fetcher answered it
    assert ledger.answered("https://elsewhere/") is None
    assert not ledger.pending
    assert ledger.next_batch(1).topic == []  # the page answered while waiting is skipped


def test_a_replay_knows_done_and_dispatched_pages_and_waits_for_the_dispatched():
    ledger = RunLedger(host_of)
    ledger.done_before("https://a/1")
    ledger.dispatched_before("https://a/2")
    assert ledger.known("https://a/1")
    assert ledger.known("https://a/2")
    assert not ledger.known("https://a/3")
    ledger.enqueue([page("https://a/3")])
    assert ledger.next_batch(1).topic == []  # a/2 holds a's window of 1
    assert ledger.answered("https://a/2") is True
    assert urls(ledger.next_batch(1).topic) == ["https://a/3"]


def test_giving_up_returns_each_page_without_a_result_once():
    admitted = [page(f"https://a/{n}") for n in range(4)]
    ledger = RunLedger(host_of)
    ledger.enqueue(admitted)
    ledger.next_batch(2)  # a/0 and a/1 dispatched
    ledger.answered("https://a/0")
    waiting_only = ledger.give_up(admitted, dispatched=False)
    assert [p.url for p in waiting_only] == ["https://a/2", "https://a/3"]
    assert ledger.dispatched == 1  # a/1 is still with a fetcher: its answer is awaited
    rest = ledger.give_up(admitted, dispatched=True)
    assert [p.url for p in rest] == ["https://a/1"]
    assert ledger.give_up(admitted, dispatched=True) == []
    assert not ledger.pending
