"""What one record publishes, kept until the broker acknowledged every message of it.

A broker outage must not cost a page render: a message whose send or acknowledgement failed
with a retriable error is sent again (in order, after a backoff with full jitter) from what
was kept here, until the broker takes it. A message that can never be published (too large,
not authorised) raises `PublishError`, which ends the record instead of looping.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from service.backoff import backoff_s
from service.logs import get_logger
from service.messaging.failures import PublishError, is_retriable

if TYPE_CHECKING:
    from collections.abc import Callable

    from service.messaging.chunks import Headers
    from service.messaging.publisher import Delivery, Message, Publisher

log = get_logger(__name__)

RETRY_BASE_S: Final = 1.0
"""Bound of the first re-send's random wait; it doubles with each round."""

RETRY_MAX_S: Final = 30.0
"""Longest wait between two rounds of re-sending."""


@dataclass(slots=True, eq=False)
class _Entry:
    message: Message
    delivery: Delivery | None = None
    """None until it was handed to the producer (or after that failed)."""
    acked: bool = False


class Outbox:
    """Sends messages in order and makes sure each one is acknowledged, re-sending if needed.

    `owned` is set while the worker owns the partition of the record being answered: while
    a rebalance decides where it goes, nothing is sent.
    """

    def __init__(
        self,
        publisher: Publisher,
        *,
        on_resend: Callable[[int], None] | None = None,
        retry_base_s: float = RETRY_BASE_S,
        owned: asyncio.Event | None = None,
    ) -> None:
        self._publisher = publisher
        self._owned = owned
        self._entries: list[_Entry] = []
        self._on_resend = on_resend
        self._retry_base_s = retry_base_s

    async def put(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes,
        headers: Headers | None = None,
        *,
        chunk_id: str | None = None,
        partition: int | None = None,
    ) -> None:
        """Send `value` (chunked when `chunk_id` is given and it is large) to `partition`, or
        its key's; do not wait."""
        messages = self._publisher.messages(
            topic, key, value, headers, chunk_id=chunk_id, partition=partition
        )
        for message in messages:
            entry = _Entry(message)
            self._entries.append(entry)
            await self._send(entry)

    async def flush(self) -> None:
        """Return once the broker acknowledged everything put so far."""
        attempt = 0
        while pending := [entry for entry in self._entries if not entry.acked]:
            waiting = [e.delivery for e in pending if e.delivery and not e.delivery.done()]
            if waiting:
                await asyncio.wait(waiting, timeout=self._publisher.timeout_s)
            failed = [entry for entry in pending if self._settle(entry)]
            if failed:
                await self._resend(failed, attempt)
                attempt += 1
        self._entries.clear()

    def _settle(self, entry: _Entry) -> bool:
        """Mark an acknowledged entry; True when it must be sent again."""
        delivery = entry.delivery
        if delivery is None or delivery.cancelled():
            return True
        if not delivery.done():
            return False
        error = delivery.exception()
        if error is None:
            entry.acked = True
            return False
        self._raise_if_fatal(error, entry.message)
        return True

    async def _resend(self, failed: list[_Entry], attempt: int) -> None:
        wait_s = backoff_s(attempt, base_s=self._retry_base_s, max_s=RETRY_MAX_S)
        log.warning("publish.retrying", messages=len(failed), attempt=attempt + 1, wait_s=wait_s)
        await asyncio.sleep(wait_s)
        if self._on_resend is not None:
            self._on_resend(len(failed))
        for entry in failed:
            await self._send(entry)

    async def _send(self, entry: _Entry) -> None:
        """Hand one message to the producer, once this worker owns the record's partition."""
        entry.delivery = None
        if self._owned is not None:
            await self._owned.wait()
        try:
            entry.delivery = await self._publisher.send(entry.message)
        except Exception as exc:  # noqa: BLE001  # classified: retriable ones are re-sent
            self._raise_if_fatal(exc, entry.message)
            log.debug("publish.send_failed", topic=entry.message.topic, error=repr(exc))

    @staticmethod
    def _raise_if_fatal(error: BaseException, message: Message) -> None:
        if not is_retriable(error):
            size = len(message.value or b"")
            raise PublishError(
                f"cannot publish {size} bytes to {message.topic}: {type(error).__name__}: {error}"
            ) from error
