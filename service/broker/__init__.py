"""A local single-node Apache Kafka (KRaft) for development, the demo and the tests."""

from service.broker.jars import ensure_kafka_jars
from service.broker.local import LocalBroker

__all__ = ["LocalBroker", "ensure_kafka_jars"]
