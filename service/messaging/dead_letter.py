"""Send a record that is not a valid request to the dead-letter topic, untouched."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from service.contracts import utc_now

if TYPE_CHECKING:
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

DEAD_LETTER_HEADERS: Final = (
    ERROR_CODE,
    ERROR_MESSAGE,
    SOURCE_TOPIC,
    SOURCE_PARTITION,
    SOURCE_OFFSET,
    WORKER,
    FAILED_AT,
)
"""Headers the worker adds; the record's own headers come first, unchanged."""


async def send_dead_letter(
    publisher: Publisher,
    settings: Settings,
    record: ConsumerRecord[bytes, bytes],
    error: RejectedMessageError,
) -> None:
    """Publish the original key, value and headers plus why, and wait for the ack."""
    reasons = [
        (ERROR_CODE, error.code),
        (ERROR_MESSAGE, error.message),
        (SOURCE_TOPIC, record.topic),
        (SOURCE_PARTITION, str(record.partition)),
        (SOURCE_OFFSET, str(record.offset)),
        (WORKER, settings.worker_name),
        (FAILED_AT, utc_now().isoformat()),
    ]
    headers = [*record.headers, *((name, value.encode()) for name, value in reasons)]
    await publisher.send_and_wait(
        settings.dead_letter_topic, record.key, record.value or b"", headers
    )
