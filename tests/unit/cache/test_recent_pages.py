"""The stored pages a fetcher keeps in memory: within their byte budget, least recent out."""

from __future__ import annotations

from datetime import UTC, datetime

from service.cache.records import StoredPage
from service.cache.store import RecentPages


def _page(n: int, size: int) -> StoredPage:
    return StoredPage(
        key=f"{n:064x}",
        url=f"http://site.test/{n}",
        final_url=f"http://site.test/{n}",
        status_code=200,
        html="x" * size,
        fetched_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_the_least_recently_used_page_leaves_first_when_the_budget_is_full():
    recent = RecentPages(budget_bytes=250)
    for n in range(3):
        recent.put((0, n), _page(n, 100))
    assert recent.get((0, 0)) is None
    assert recent.get((0, 1)) is not None
    recent.put((0, 3), _page(3, 100))
    assert recent.get((0, 2)) is None
    assert recent.get((0, 1)) is not None


def test_a_page_larger_than_the_budget_is_not_kept():
    recent = RecentPages(budget_bytes=50)
    recent.put((1, 7), _page(7, 100))
    assert recent.get((1, 7)) is None
