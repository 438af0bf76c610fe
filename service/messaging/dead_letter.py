"""Send a record that cannot be run to the dead-letter topic, with headers saying why.

The original key, value and headers are kept as they were, as long as the dead letter fits in
one message, but for the value's credentials (`redact.py`: page headers, cookies, a proxy's
user info, a webhook's headers and token), which read `[redacted]` and are named in a header;
beyond the producer's limit the value is cut to a prefix (headers give the size and sha256 of
the value as kept) and oversized original headers are left out. A dead letter is always
publishable, so it can never loop.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

from service.contracts import utc_now
from service.messaging.outbox import Outbox
from service.messaging.redact import redacted

if TYPE_CHECKING:
    import asyncio

    from aiokafka import ConsumerRecord

    from service.errors import RejectedMessageError
    from service.messaging.publisher import Publisher
    from service.settings import Settings

ERROR_CODE: Final = "crawlstream-error-code"
ERROR_MESSAGE: Final = "crawlstream-error-message"
SOURCE_TOPIC: Final = "crawlstream-source-topic"
SOURCE_PARTITION: Final = "crawlstream-source-partition"
SOURCE_OFFSET: Final = "crawlstream-source-offset"
WORKER: Final = "crawlstream-worker"
FAILED_AT: Final = "crawlstream-failed-at"
ORIGINAL_SIZE: Final = "crawlstream-original-size"
ORIGINAL_SHA256: Final = "crawlstream-original-sha256"
TRUNCATED: Final = "crawlstream-truncated"
REDACTED: Final = "crawlstream-redacted"
"""The value's fields whose credentials were redacted (comma-separated)."""

ROOM_BYTES: Final = 32_768
"""Kept free below the message limit for the added headers and the record's framing."""

MAX_KEY_BYTES: Final = 4096
"""Longest original key kept as it is (a longer one is cut; the partition may then differ)."""

DEAD_LETTER_HEADERS: Final = (
    ERROR_CODE,
    ERROR_MESSAGE,
    SOURCE_TOPIC,
    SOURCE_PARTITION,
    SOURCE_OFFSET,
    WORKER,
    FAILED_AT,
    ORIGINAL_SIZE,
    ORIGINAL_SHA256,
    TRUNCATED,
    REDACTED,
)
"""Headers the worker adds; the record's own headers come first, unchanged."""

MAX_MESSAGE_CHARS: Final = 1000
"""Longest error message put in a dead letter's headers."""


async def send_dead_letter(
    publisher: Publisher,
    settings: Settings,
    record: ConsumerRecord[bytes, bytes],
    error: RejectedMessageError,
    owned: asyncio.Event | None = None,
) -> None:
    """Publish the original key, value (redacted) and headers (cut to fit) plus why; wait for
    the ack."""
    value, fields = redacted(record.value or b"")
    budget = int(settings.max_message_bytes) - ROOM_BYTES
    key, value, headers, cuts = _fitted(record, value, budget)
    if fields:
        cuts.append((REDACTED, ",".join(fields)))
    reasons = [
        (ERROR_CODE, error.code),
        (ERROR_MESSAGE, error.message[:MAX_MESSAGE_CHARS]),
        (SOURCE_TOPIC, record.topic),
        (SOURCE_PARTITION, str(record.partition)),
        (SOURCE_OFFSET, str(record.offset)),
        (WORKER, settings.worker_name),
        (FAILED_AT, utc_now().isoformat()),
        *cuts,
    ]
    outbox = Outbox(publisher, owned=owned)
    await outbox.put(
        settings.dead_letter_topic,
        key,
        value,
        [*headers, *((name, text.encode()) for name, text in reasons)],
    )
    await outbox.flush()


def _fitted(
    record: ConsumerRecord[bytes, bytes], value: bytes, budget: int
) -> tuple[bytes | None, bytes, list[tuple[str, bytes]], list[tuple[str, str]]]:
    """Key and headers of `record` and its `value` within `budget` bytes, and headers naming
    the cuts."""
    key, headers = record.key, list(record.headers)
    cuts: list[tuple[str, str]] = []
    if key is not None and len(key) > MAX_KEY_BYTES:
        key = key[:MAX_KEY_BYTES]
        cuts.append((TRUNCATED, "key"))
    header_bytes = sum(len(name) + len(data or b"") for name, data in headers)
    if header_bytes > budget // 4:
        headers = []
        cuts.append((TRUNCATED, "headers"))
    room = budget - len(key or b"") - min(header_bytes, budget // 4)
    if len(value) > room:
        cuts += [
            (TRUNCATED, "value"),
            (ORIGINAL_SIZE, str(len(value))),
            (ORIGINAL_SHA256, hashlib.sha256(value).hexdigest()),
        ]
        value = value[: max(room, 0)]
    return key, value, headers, cuts
