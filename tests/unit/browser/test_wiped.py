"""The pool of wiped contexts (pure logic: contexts are stand-ins) and the origins a wipe
clears."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from service.browser.context import _origin
from service.browser.wiped import WipedContexts


@dataclass(eq=False)
class Stub:
    name: str
    usable: bool = True


def _pool(capacity: int = 4, idle_s: float = 60.0) -> tuple[WipedContexts[Stub], list[str]]:
    closed: list[str] = []
    return WipedContexts(
        capacity=capacity, idle_s=idle_s, close=lambda c: closed.append(c.name)
    ), closed


async def test_a_wiped_context_goes_to_one_request_with_the_same_key() -> None:
    pool, closed = _pool()
    a, b = Stub("a"), Stub("b")
    pool.put("", a)
    pool.put("image", b)
    assert pool.take("font") is None
    assert pool.take("") is a
    assert pool.take("") is None
    assert pool.take("image") is b
    assert pool.ready == 0
    assert closed == []


async def test_the_most_recently_wiped_is_taken_first() -> None:
    pool, _ = _pool()
    first, second = Stub("first"), Stub("second")
    pool.put("", first)
    pool.put("", second)
    assert pool.take("") is second
    assert pool.take("") is first


async def test_beyond_capacity_the_oldest_is_closed() -> None:
    pool, closed = _pool(capacity=2)
    for name in "abc":
        pool.put("", Stub(name))
    assert closed == ["a"]
    assert pool.ready == 2


async def test_capacity_zero_closes_every_context() -> None:
    pool, closed = _pool(capacity=0)
    pool.put("", Stub("a"))
    assert closed == ["a"]
    assert pool.take("") is None


async def test_an_unusable_context_is_closed_not_handed_out() -> None:
    pool, closed = _pool()
    dead = Stub("dead")
    pool.put("", Stub("alive"))
    pool.put("", dead)
    dead.usable = False
    taken = pool.take("")
    assert taken is not None
    assert taken.name == "alive"
    assert closed == ["dead"]


async def test_a_context_waiting_longer_than_idle_is_closed() -> None:
    pool, closed = _pool(idle_s=0.01)
    pool.put("", Stub("a"))
    async with asyncio.timeout(5):
        while not closed:
            await asyncio.sleep(0.01)
    assert closed == ["a"]
    assert pool.take("") is None


async def test_clear_closes_all_and_a_taken_context_is_not_closed_by_its_timer() -> None:
    pool, closed = _pool(idle_s=0.05)
    taken, left = Stub("taken"), Stub("left")
    pool.put("", taken)
    assert pool.take("") is taken
    pool.put("x", left)
    pool.clear()
    assert closed == ["left"]
    await asyncio.sleep(0.1)
    assert closed == ["left"]


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://Example.COM/a?b#c", "http://example.com"),
        ("http://example.com:80/", "http://example.com"),
        ("https://example.com:443/x", "https://example.com"),
        ("https://example.com:8443/x", "https://example.com:8443"),
        ("http://127.0.0.1:8080/page", "http://127.0.0.1:8080"),
        ("http://[::1]:9000/", "http://[::1]:9000"),
        ("about:blank", None),
        ("data:text/html,hi", None),
        ("blob:http://example.com/uuid", None),
        ("http://example.com:99999/", None),
        ("", None),
    ],
)
def test_origin_is_what_storage_is_keyed_by(url: str, origin: str | None) -> None:
    assert _origin(url) == origin
