"""Settings: read from the environment only, and a bad value names its variable."""

from __future__ import annotations

from datetime import timedelta

import pytest

from service.errors import ConfigurationError
from service.settings import load_settings


def test_bad_values_fail_with_one_line_naming_the_variable(monkeypatch):
    """A wrong type stops start-up with the variable's name in a single line."""
    monkeypatch.setenv("CRAWL_MAX_PAGE_SLOTS", "many")
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith("CRAWL_MAX_PAGE_SLOTS: ")
    assert "\n" not in message


def test_environment_values_are_parsed(monkeypatch):
    """Unprefixed KAFKA_BOOTSTRAP_SERVERS, comma lists, seconds and sizes all parse."""
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "k1:9092,k2:9092")
    monkeypatch.setenv("CRAWL_ALLOWED_HOSTS", "127.0.0.1:8080, Example.org")
    monkeypatch.setenv("CRAWL_SHUTDOWN_GRACE", "2.5")
    monkeypatch.setenv("CRAWL_MEMORY_LIMIT", "1GiB")
    settings = load_settings()
    assert settings.kafka_bootstrap_servers == "k1:9092,k2:9092"
    assert settings.allowed_hosts == ["127.0.0.1:8080", "example.org"]
    assert settings.shutdown_grace == timedelta(seconds=2.5)
    assert settings.memory_limit == 2**30


def test_egress_defaults_and_lists(monkeypatch):
    """The egress proxy serves ports 80 and 443 and holds 512 connections unless told."""
    settings = load_settings()
    assert settings.egress_ports == [80, 443]
    assert settings.egress_max_connections == 512
    monkeypatch.setenv("CRAWL_EGRESS_PORTS", "80, 443,8080")
    monkeypatch.setenv("CRAWL_EGRESS_MAX_CONNECTIONS", "64")
    settings = load_settings()
    assert settings.egress_ports == [80, 443, 8080]
    assert settings.egress_max_connections == 64


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CRAWL_EGRESS_PORTS", "0"),
        ("CRAWL_EGRESS_PORTS", "80,65536"),
        ("CRAWL_EGRESS_PORTS", "smtp"),
        ("CRAWL_EGRESS_MAX_CONNECTIONS", "0"),
    ],
)
def test_bad_egress_values_name_their_variable(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"{variable}: ")
