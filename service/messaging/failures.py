"""Which broker errors are worth trying again, and which end the record they happened to."""

from __future__ import annotations

from typing import Final

from aiokafka.errors import KafkaError, KafkaTimeoutError

from service.errors import PermanentError, RetryableError

ALWAYS_RETRIABLE: Final = (RetryableError, TimeoutError, KafkaTimeoutError, ConnectionError)
"""The broker is away or slow: aiokafka marks its own timeout not retriable, but it is."""


class PublishError(PermanentError):
    """A message can never be published (too large, not authorised): its record ends here."""


def is_retriable(exc: BaseException) -> bool:
    """True when trying again later may succeed; a group is retriable only if all of it is."""
    if isinstance(exc, BaseExceptionGroup):
        return all(is_retriable(inner) for inner in exc.exceptions)
    if isinstance(exc, ALWAYS_RETRIABLE):
        return True
    return isinstance(exc, KafkaError) and bool(exc.retriable)


def root_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (a `TaskGroup` wraps what its body raised)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
