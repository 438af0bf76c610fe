"""Kafka in and out: the requests consumer, the publisher, topics, chunks, dead letters."""

from service.messaging.consumer import RecordConsumer
from service.messaging.offsets import OffsetTracker
from service.messaging.publisher import Publisher
from service.messaging.topics import ensure_topics

__all__ = ["OffsetTracker", "Publisher", "RecordConsumer", "ensure_topics"]
