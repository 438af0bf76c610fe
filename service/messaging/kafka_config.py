"""How every aiokafka client is configured, and how a refused login is reported."""

from __future__ import annotations

import contextlib
import logging
import ssl
from typing import TYPE_CHECKING, Any, Final

from aiokafka.errors import (
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from service.errors import BrokerUnavailableError, ConfigurationError
from service.settings import env_name

if TYPE_CHECKING:
    from collections.abc import Iterator

    from service.settings import Settings

SASL_REFUSALS: Final = (
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
)
"""What aiokafka raises when the broker does not accept the SASL login."""

_BOOTSTRAP_LOGGER: Final = "aiokafka"
"""The logger of `aiokafka.client`, whose bootstrap logs why a broker refused the connection
and then raises a bare `KafkaConnectionError("Unable to bootstrap ...")` that does not."""


class KafkaAuthenticationError(ConfigurationError):
    """The brokers refused the SASL credentials: fix the settings, retrying will not help."""

    def __init__(self, settings: Settings, refusal: KafkaError) -> None:
        given = refusal.args[0] if refusal.args else None
        reason = given if isinstance(given, str) else getattr(refusal, "description", refusal)
        super().__init__(
            f"Kafka authentication failed for user {settings.kafka_sasl_username!r}"
            f" ({settings.kafka_sasl_mechanism}): {reason}"
        )


def client_options(settings: Settings) -> dict[str, Any]:
    """Bootstrap servers and security options for aiokafka clients."""
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        "security_protocol": settings.kafka_security_protocol,
        "request_timeout_ms": int(settings.kafka_timeout.total_seconds() * 1000),
    }
    if settings.kafka_security_protocol in {"SSL", "SASL_SSL"}:
        options["ssl_context"] = _ssl_context(settings)
    if settings.kafka_security_protocol.startswith("SASL"):
        options |= _sasl_options(settings)
    return options


@contextlib.contextmanager
def authentication_reported(settings: Settings) -> Iterator[None]:
    """Turn a failure to connect that a SASL refusal caused into `KafkaAuthenticationError`.

    While the block runs, aiokafka's log line about a refused bootstrap login is held back:
    the error raised here says the same thing once.
    """
    watch = _RefusalWatch()
    logger = logging.getLogger(_BOOTSTRAP_LOGGER)
    logger.addFilter(watch)
    try:
        yield
    except (KafkaError, BrokerUnavailableError) as exc:
        if watch.refusal is None:
            raise
        raise KafkaAuthenticationError(settings, watch.refusal) from exc
    finally:
        logger.removeFilter(watch)


class _RefusalWatch(logging.Filter):
    """Keeps the last SASL refusal aiokafka logged while bootstrapping, and drops its line."""

    def __init__(self) -> None:
        super().__init__()
        self.refusal: KafkaError | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        arguments = record.args if isinstance(record.args, tuple) else ()
        refusals = [arg for arg in arguments if isinstance(arg, SASL_REFUSALS)]
        if record.funcName != "bootstrap" or not refusals:
            return True
        self.refusal = refusals[-1]
        return False


def _sasl_options(settings: Settings) -> dict[str, Any]:
    """The login; a SASL protocol without a user name or password is a configuration error."""
    username, password = settings.kafka_sasl_username, settings.kafka_sasl_password
    if not username:
        raise _missing_for_sasl("kafka_sasl_username", settings)
    if password is None or not password.get_secret_value():
        raise _missing_for_sasl("kafka_sasl_password", settings)
    return {
        "sasl_mechanism": settings.kafka_sasl_mechanism,
        "sasl_plain_username": username,
        "sasl_plain_password": password.get_secret_value(),
    }


def _missing_for_sasl(field: str, settings: Settings) -> ConfigurationError:
    protocol = f"{env_name('kafka_security_protocol')}={settings.kafka_security_protocol}"
    return ConfigurationError(f"{env_name(field)} is required with {protocol}")


def _ssl_context(settings: Settings) -> ssl.SSLContext:
    cafile = str(settings.kafka_ssl_cafile) if settings.kafka_ssl_cafile else None
    context = ssl.create_default_context(cafile=cafile)
    if settings.kafka_ssl_certfile is not None:
        keyfile = str(settings.kafka_ssl_keyfile) if settings.kafka_ssl_keyfile else None
        context.load_cert_chain(str(settings.kafka_ssl_certfile), keyfile)
    return context
