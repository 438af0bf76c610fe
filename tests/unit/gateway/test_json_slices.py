"""A body parsed a slice at a time is `json.loads`'s value, refuses what `json.loads`
refuses, and yields between slices (the event loop serves other calls meanwhile)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from service.gateway.json_slices import MAX_DEPTH, SLICE_TOKENS, parse, steps, text_of


def _run(text: str) -> tuple[Any, int]:
    parser = steps(text)
    slices = 0
    while True:
        try:
            next(parser)
        except StopIteration as done:
            return done.value, slices
        slices += 1


VALID = [
    "[]",
    "{}",
    ' [ 1 , [ ] , { } , {"a" : [ {"b":[]} ] } ] ',
    '"x"',
    "-0.5e-3",
    '{"a":1,"a":2,"b":3}',
    "[[[[1]]]]",
    '["a", "b" ,"c\\"d", "\\u00e9\\ud83d\\ude00", 1, 2.5, -3e5, true, false, null, "last"]',
    '{"urls": ["https://e.com/1", "https://e.com/2"], "x": {"y": [NaN, Infinity, -Infinity]}}',
    json.dumps({"formats": ["markdown", {"type": "json", "schema": {"a": {"b": [1, 2]}}}]}),
    json.dumps([*range(5000), "tail"]),
]


@pytest.mark.parametrize("text", VALID)
def test_the_value_is_json_loads(text):
    """Every value, and an object's key order (duplicates: the last value, the first place)."""
    value, _ = _run(text)
    expected = json.loads(text)
    assert json.dumps(value) == json.dumps(expected)


INVALID = [
    "",
    "[",
    "[1,]",
    '{"a":1,}',
    '{"a" 1}',
    "{a:1}",
    "[1 2]",
    "1 2",
    '"\x01"',
    "[1]]",
    "\ufeff[]",
    '{"a":}',
    "]",
    '{"a":1',
    '["a","b\\x",1]',
    "[01, 2]",
    '["a"\n,"b",]',
    "[tru]",
]


@pytest.mark.parametrize("text", INVALID)
def test_what_json_refuses_is_refused(text):
    with pytest.raises(ValueError):  # noqa: PT011 - json.loads's own error, whatever the text
        json.loads(text)
    with pytest.raises(ValueError):  # noqa: PT011
        _run(text)


def test_nesting_past_the_depth_is_refused():
    """Deeper than `MAX_DEPTH` is a ValueError (json.loads would fail at the recursion
    limit), `MAX_DEPTH` itself is read."""
    assert _run("[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH)[0] is not None
    with pytest.raises(ValueError, match="deeper"):
        _run("[" * (MAX_DEPTH + 1) + "1" + "]" * (MAX_DEPTH + 1))


def test_bytes_are_decoded_as_json_loads_decodes_them():
    """UTF-8 with a BOM, UTF-16: the same text as `json.loads(bytes)` reads."""
    for raw in ('["é"]'.encode("utf-8-sig"), '["é"]'.encode("utf-16")):
        assert _run(text_of(raw))[0] == json.loads(raw)


def test_a_large_list_of_urls_is_read_in_many_slices():
    """140,000 URLs (a 9.5 MiB body) take hundreds of slices, each of about `SLICE_TOKENS`
    values."""
    urls = [f"https://example.com/{n:08d}/{'p' * 40}" for n in range(140_000)]
    value, slices = _run(json.dumps({"urls": urls}))
    assert value == {"urls": urls}
    assert slices >= 140_000 // (2 * SLICE_TOKENS)


async def test_parse_lets_other_tasks_run():
    """While a 9.5 MiB body is parsed, a task scheduled meanwhile runs before it ends."""
    raw = json.dumps({"urls": [f"https://example.com/{n}" for n in range(140_000)]}).encode()
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    async def big() -> None:
        value = await parse(raw)
        ran.append(f"big {len(value['urls'])}")

    async with asyncio.TaskGroup() as group:
        group.create_task(big())
        await asyncio.sleep(0)
        group.create_task(other())
    assert ran == ["other", "big 140000"]
