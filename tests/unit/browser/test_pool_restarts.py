"""`crawl_browser_restarts_total{reason}`: each replaced browser is counted once, under why it
was replaced (the memory gate's recycle was counted twice: `memory` by the gate, `recycled`
by the pool)."""

from __future__ import annotations

from dataclasses import dataclass, field

from service.browser.pool import BrowserPool
from service.settings import Settings


@dataclass
class _Browser:
    connected: bool = True
    closed: bool = False
    version: str = "fake"

    def is_connected(self) -> bool:
        return self.connected

    async def close(self) -> None:
        self.closed = True


@dataclass
class _Chromium:
    launched: list[_Browser] = field(default_factory=list)

    async def launch(self, **_: object) -> _Browser:
        self.launched.append(_Browser())
        return self.launched[-1]


@dataclass
class _Playwright:
    chromium: _Chromium = field(default_factory=_Chromium)


def _pool(restarts: list[str], **settings: object) -> tuple[BrowserPool, _Chromium]:
    pool = BrowserPool(Settings(**settings), on_restart=restarts.append)  # type: ignore[arg-type]
    playwright = _Playwright()
    pool._playwright = playwright  # type: ignore[assignment]  # noqa: SLF001 (no real browser here)
    return pool, playwright.chromium


async def test_a_memory_recycle_counts_one_restart_under_memory():
    """The gate asks for a fresh browser because the tree grew: one restart, `memory`."""
    restarts: list[str] = []
    pool, chromium = _pool(restarts)
    await pool._ensure_browser()  # noqa: SLF001
    pool.recycle("grew 900 MiB over 40 pages", "memory")
    await pool._ensure_browser()  # noqa: SLF001
    assert restarts == ["memory"]
    assert len(chromium.launched) == 2
    assert chromium.launched[0].closed


async def test_a_browser_that_served_its_pages_counts_under_pages_and_a_dead_one_under_died():
    """`CRAWL_BROWSER_RECYCLE_PAGES` reached: `pages`; a disconnected browser: `died`."""
    restarts: list[str] = []
    pool, chromium = _pool(restarts, browser_recycle_pages=2)
    first = await pool._ensure_browser()  # noqa: SLF001
    first.pages_served = 2
    await pool._ensure_browser()  # noqa: SLF001
    chromium.launched[-1].connected = False
    await pool._ensure_browser()  # noqa: SLF001
    assert restarts == ["pages", "died"]
    assert len(chromium.launched) == 3
