"""The egress proxy's credential check: only this worker's exact credential passes."""

from __future__ import annotations

import base64

import pytest

from service.egress.auth import ProxyCredential, ProxyKeys

CREDENTIAL = ProxyCredential(username="worker", password="s3cret:with-colon")  # noqa: S106


def _basic(pair: str, scheme: str = "Basic") -> str:
    return f"{scheme} {base64.b64encode(pair.encode()).decode()}"


@pytest.mark.parametrize(
    "header",
    [
        _basic("worker:s3cret:with-colon"),
        _basic("worker:s3cret:with-colon", scheme="basic"),
        _basic("worker:s3cret:with-colon", scheme="BASIC"),
        "  " + _basic("worker:s3cret:with-colon") + "  ",
    ],
)
def test_the_exact_credential_is_admitted(header):
    assert CREDENTIAL.admits(header)


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Basic",
        "Basic ",
        _basic("worker:s3cret"),
        _basic("worker:s3cret:with-colonX"),
        _basic("Worker:s3cret:with-colon"),
        _basic(":s3cret:with-colon"),
        _basic("worker:s3cret:with-colon", scheme="Bearer"),
        "Basic not*base64!",
        "Basic " + base64.b64encode(b"worker:s3cret:with-colon").decode()[:-2],
        "Bearer worker:s3cret:with-colon",
        # two Proxy-Authorization headers arrive comma-joined: never admitted
        f"{_basic('worker:s3cret:with-colon')}, {_basic('worker:s3cret:with-colon')}",
    ],
)
def test_anything_else_is_refused(header):
    assert not CREDENTIAL.admits(header)


def test_the_header_value_is_what_clients_send():
    assert CREDENTIAL.header_value == _basic("worker:s3cret:with-colon")
    assert CREDENTIAL.admits(CREDENTIAL.header_value)


def test_generated_credentials_are_random_and_never_shown():
    """Each worker gets its own credential; the password stays out of repr (and so logs)."""
    first, second = ProxyCredential.generate(), ProxyCredential.generate()
    assert first != second
    assert len(first.password) >= 32
    assert first.password not in repr(first)
    assert not first.admits(second.header_value)


def test_each_context_credential_names_its_owner():
    """Credentials derived for contexts are admitted and tell the contexts apart; the
    worker's own credential names the worker."""
    keys = ProxyKeys.generate(CREDENTIAL)
    first, second = keys.for_context(), keys.for_context()
    assert first.username != second.username
    assert keys.owner(first.header_value) == first.username
    assert keys.owner(second.header_value) == second.username
    assert keys.owner(CREDENTIAL.header_value) == "worker"


@pytest.mark.parametrize(
    "forge",
    [
        "{name}:{password}x",
        "{name}x:{password}",
        "ctx-other:{password}",
        "{name}",
        "{name}:",
    ],
)
def test_a_forged_context_credential_is_refused(forge):
    """Only the worker's secret makes a context credential: no other name or password."""
    keys = ProxyKeys.generate(CREDENTIAL)
    real = keys.for_context()
    assert keys.owner(_basic(forge.format(name=real.username, password=real.password))) is None
    assert ProxyKeys.generate(CREDENTIAL).owner(real.header_value) is None  # another secret
