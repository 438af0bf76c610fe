"""Keyword arguments shared by every aiokafka client, built from the settings."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.settings import Settings


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
        password = settings.kafka_sasl_password
        options |= {
            "sasl_mechanism": settings.kafka_sasl_mechanism,
            "sasl_plain_username": settings.kafka_sasl_username,
            "sasl_plain_password": password.get_secret_value() if password else None,
        }
    return options


def _ssl_context(settings: Settings) -> ssl.SSLContext:
    cafile = str(settings.kafka_ssl_cafile) if settings.kafka_ssl_cafile else None
    context = ssl.create_default_context(cafile=cafile)
    if settings.kafka_ssl_certfile is not None:
        keyfile = str(settings.kafka_ssl_keyfile) if settings.kafka_ssl_keyfile else None
        context.load_cert_chain(str(settings.kafka_ssl_certfile), keyfile)
    return context
