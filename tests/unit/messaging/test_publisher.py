"""A worker's result as the publisher sends it: whole it is JSON, in chunks it is chunks."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import pytest

from service.messaging.publisher import JSON_HEADERS, Publisher
from service.settings import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
async def publisher() -> AsyncIterator[Publisher]:
    """A publisher with the default settings, never connected (`messages` needs no broker)."""
    async with AsyncExitStack() as stack:
        made = Publisher(Settings())
        stack.push_async_exit(made)  # closes the unstarted producer
        yield made


async def test_a_large_result_goes_as_utf8_chunks_not_labelled_json(publisher):
    """Over the default limit, multi-byte JSON is cut into valid UTF-8 chunks of another type."""
    value = json.dumps({"text": "é€😀" * 300_000}, ensure_ascii=False).encode()
    messages = publisher.messages("results", "r-1", value, JSON_HEADERS, chunk_id="id:run")
    assert len(messages) > 1
    for message in messages:
        message.value.decode()
        headers = dict(message.headers)
        assert headers["content-type"] == b"application/vnd.crawlstream.chunk"
        assert headers["schema-version"] == b"1"
    assert b"".join(message.value for message in messages) == value


async def test_a_result_that_fits_stays_one_json_message(publisher):
    """Under the limit the value is one message with the JSON headers, no chunk headers."""
    [message] = publisher.messages("results", "r-1", b"{}", JSON_HEADERS, chunk_id="id:run")
    assert message.headers == JSON_HEADERS
