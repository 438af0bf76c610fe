"""The per-host page limit: at most N holders per host, and no entry left behind."""

from __future__ import annotations

import asyncio

import pytest

from service.worker.hosts import KeyedSemaphore, host_key


async def test_each_key_admits_at_most_its_limit():
    """Two places per host: a third page of one host waits, another host's page does not."""
    limit = KeyedSemaphore(2)
    release = asyncio.Event()
    holding: dict[str, int] = {"a": 0, "b": 0}
    peak: dict[str, int] = {"a": 0, "b": 0}

    async def page(key: str) -> None:
        async with limit.hold(key):
            holding[key] += 1
            peak[key] = max(peak[key], holding[key])
            await release.wait()
            holding[key] -= 1

    tasks = [asyncio.create_task(page(key)) for key in "aaab"]
    while holding != {"a": 2, "b": 1}:
        await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)
    assert holding == {"a": 2, "b": 1}
    release.set()
    await asyncio.gather(*tasks)
    assert peak == {"a": 2, "b": 1}


async def test_entries_are_removed_when_unused():
    """After holders, waiters and a cancelled waiter are gone, no key is kept."""
    limit = KeyedSemaphore(1)
    release = asyncio.Event()

    async def page(key: str) -> None:
        async with limit.hold(key):
            await release.wait()

    holder = asyncio.create_task(page("a"))
    waiter = asyncio.create_task(page("a"))
    others = [asyncio.create_task(page(f"host-{n}")) for n in range(10)]
    await asyncio.sleep(0)
    assert len(limit) == 11
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert len(limit) == 11
    release.set()
    await asyncio.gather(holder, *others)
    assert len(limit) == 0


async def test_a_failing_holder_frees_its_place():
    """An exception inside the block releases the place for the next page."""
    limit = KeyedSemaphore(1)
    with pytest.raises(RuntimeError):
        async with limit.hold("a"):
            raise RuntimeError("boom")
    async with asyncio.timeout(5), limit.hold("a"):
        assert len(limit) == 1
    assert len(limit) == 0


def test_limit_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        KeyedSemaphore(0)


def test_host_key_ignores_case_port_and_path():
    assert host_key("http://Example.COM:8080/a?b") == host_key("https://example.com/c")
    assert host_key("http://[::1]:80/") == "::1"
