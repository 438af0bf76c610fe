"""The outbox re-sends what a broker outage lost and ends a record that can never publish."""

from __future__ import annotations

from collections import Counter

import pytest
from aiokafka.errors import (
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordTooLargeError,
    RequestTimedOutError,
)
from inmemory import InMemoryPublisher

from service.messaging.failures import PublishError, is_retriable, root_cause
from service.messaging.outbox import Outbox


async def test_messages_lost_to_a_broker_outage_are_sent_again_not_recomputed():
    """A timed-out send and a timed-out delivery are each re-sent once; nothing else is."""
    publisher = InMemoryPublisher(
        send_errors={b"2": KafkaTimeoutError()}, delivery_errors={b"3": RequestTimedOutError()}
    )
    resent: list[int] = []
    outbox = Outbox(publisher, on_resend=resent.append, retry_base_s=0.001)  # type: ignore[arg-type]
    for value in (b"1", b"2", b"3", b"4"):
        await outbox.put("t", b"k", value)
    await outbox.flush()
    assert sorted(publisher.written) == [b"1", b"2", b"3", b"4"]
    assert publisher.sends == Counter({b"1": 1, b"2": 2, b"3": 2, b"4": 1})
    assert resent == [2]


async def test_a_message_too_large_to_publish_ends_the_record_instead_of_looping():
    """A fatal error at send or at delivery raises PublishError, once."""
    at_send = InMemoryPublisher(send_errors={b"x": MessageSizeTooLargeError()}, always=True)
    with pytest.raises(PublishError, match="MessageSizeTooLargeError"):
        await Outbox(at_send).put("t", b"k", b"x")  # type: ignore[arg-type]
    at_delivery = InMemoryPublisher(delivery_errors={b"y": RecordTooLargeError()}, always=True)
    outbox = Outbox(at_delivery)  # type: ignore[arg-type]
    await outbox.put("t", b"k", b"y")
    with pytest.raises(PublishError, match="RecordTooLargeError"):
        await outbox.flush()
    assert at_delivery.sends[b"y"] == 1


def test_errors_from_a_task_group_are_classified_by_what_they_hold():
    """An ExceptionGroup of broker timeouts is retriable; one holding a bug is not."""
    timeouts = ExceptionGroup("run", [KafkaTimeoutError(), TimeoutError()])
    mixed = ExceptionGroup("run", [KafkaTimeoutError(), KeyError("bug")])
    assert is_retriable(timeouts)
    assert not is_retriable(mixed)
    assert not is_retriable(MessageSizeTooLargeError())
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [KeyError("bug")])])
    assert isinstance(root_cause(nested), KeyError)
