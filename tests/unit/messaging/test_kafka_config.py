"""Client options carry the SASL login, and a refused login becomes one clear error."""

from __future__ import annotations

import logging

import pytest
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed

from service.errors import ConfigurationError
from service.messaging.kafka_config import (
    KafkaAuthenticationError,
    authentication_reported,
    client_options,
)
from service.settings import Settings

SASL = {
    "kafka_security_protocol": "SASL_PLAINTEXT",
    "kafka_sasl_mechanism": "SCRAM-SHA-256",
}

PASSWORD = "secret"  # noqa: S105 - a made-up login for these tests


def test_sasl_protocol_passes_mechanism_and_login():
    """SASL_PLAINTEXT with a user gives aiokafka the mechanism, user name and password."""
    settings = Settings(**SASL, kafka_sasl_username="alice", kafka_sasl_password=PASSWORD)
    options = client_options(settings)
    assert options["security_protocol"] == "SASL_PLAINTEXT"
    assert options["sasl_mechanism"] == "SCRAM-SHA-256"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("alice", PASSWORD)


def test_plaintext_has_no_sasl_options():
    """Without SASL no login is passed, even when one is configured."""
    options = client_options(Settings(kafka_sasl_username="alice"))
    assert options["security_protocol"] == "PLAINTEXT"
    assert not any(key.startswith("sasl_") for key in options)


def test_sasl_without_username_names_the_variable():
    """A SASL protocol without a user name is a configuration error naming the variable."""
    settings = Settings(**SASL, kafka_sasl_password=PASSWORD)
    with pytest.raises(ConfigurationError, match="CRAWL_KAFKA_SASL_USERNAME is required"):
        client_options(settings)


def test_sasl_without_password_names_the_variable():
    """A SASL protocol with an empty password is a configuration error naming the variable."""
    settings = Settings(**SASL, kafka_sasl_username="alice", kafka_sasl_password="")
    with pytest.raises(ConfigurationError, match="CRAWL_KAFKA_SASL_PASSWORD is required"):
        client_options(settings)


def bootstrap(refusal: Exception | None = None) -> None:
    """Logs and raises the way `aiokafka.client.AIOKafkaClient.bootstrap` does."""
    logging.getLogger("aiokafka").error('Unable connect to "%s:%s": %s', "h", 9092, refusal)
    raise KafkaConnectionError("Unable to bootstrap from [('h', 9092)]")


def test_refused_bootstrap_becomes_authentication_error(caplog):
    """A bootstrap failure after a SASL refusal names the user and mechanism, and aiokafka's
    own log line about it is held back."""
    settings = Settings(**SASL, kafka_sasl_username="alice", kafka_sasl_password=PASSWORD)
    refusal = SaslAuthenticationFailed("invalid credentials with SASL mechanism SCRAM-SHA-256")
    with pytest.raises(KafkaAuthenticationError) as raised, authentication_reported(settings):
        bootstrap(refusal)
    assert str(raised.value) == (
        "Kafka authentication failed for user 'alice' (SCRAM-SHA-256):"
        " invalid credentials with SASL mechanism SCRAM-SHA-256"
    )
    assert isinstance(raised.value, ConfigurationError)
    assert not caplog.records


def test_other_connection_failures_pass_through(caplog):
    """Without a refusal, a failure to connect is left as it is and aiokafka's line stays."""
    with pytest.raises(KafkaConnectionError), authentication_reported(Settings()):
        bootstrap(OSError("Connection refused"))
    assert [record.getMessage() for record in caplog.records] == [
        'Unable connect to "h:9092": Connection refused'
    ]
