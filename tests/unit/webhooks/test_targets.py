"""Sealed webhook targets and the secret that signs a tenant's events (pure)."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from service.contracts_webhook import SealedWebhook, WebhookConfig
from service.errors import ConfigurationError
from service.gateway.keys import KeyEntry, KeyRing
from service.sealing.seal import SealError, derive, open_sealed, seal
from service.sealing.targets import Sealer, SigningKeys, TargetError, origin_of
from service.settings import Settings

KEY = derive(b"a seal key of the test")
HOOK = WebhookConfig(
    url="https://hooks.example/in?token=tok-123",
    headers={"Authorization": "Bearer hdr-456"},
    metadata={"order": 7},
)


def test_a_sealed_token_opens_with_its_key_only_and_hides_its_plaintext():
    token = seal(KEY, b"secret words")
    assert b"secret" not in token.encode()
    assert open_sealed(KEY, token) == b"secret words"
    with pytest.raises(SealError):
        open_sealed(derive(b"another key"), token)
    altered = token[:-6] + ("A" if token[-6] != "A" else "B") + token[-5:]
    with pytest.raises(SealError):
        open_sealed(KEY, altered)
    with pytest.raises(SealError):
        open_sealed(KEY, "v1.not*base64")
    assert seal(KEY, b"x") != seal(KEY, b"x")  # a fresh nonce each time


def test_the_gateway_seals_url_headers_and_tenant_and_the_dispatcher_opens_them():
    sealer = Sealer(KEY)
    record = sealer.record("job-1", "tenant-a", HOOK)
    text = json.dumps(record)
    assert "tok-123" not in text
    assert "hdr-456" not in text
    assert "tenant-a" not in text
    assert record["metadata"] == {"order": 7}
    hook = WebhookConfig.of({"webhook": record})
    assert isinstance(hook, SealedWebhook)
    target = sealer.open("job-1", hook)
    assert (target.url, dict(target.headers), target.tenant) == (
        HOOK.url,
        HOOK.headers,
        "tenant-a",
    )
    assert target.origin == "https://hooks.example:443"
    with pytest.raises(TargetError, match="another job"):
        sealer.open("job-2", hook)
    with pytest.raises(TargetError):
        Sealer(derive(b"other")).open("job-1", hook)
    with pytest.raises(TargetError):
        Sealer(None).open("job-1", hook)


def test_without_a_seal_key_credentials_are_refused_and_a_bare_url_goes_as_given():
    sealer = Sealer(None)
    assert sealer.refusal(HOOK) is not None
    with pytest.raises(TargetError):
        sealer.record("job-1", "t", HOOK)
    bare = WebhookConfig(url="https://hooks.example/in")
    assert sealer.refusal(bare) is None
    assert sealer.record("job-1", "t", bare)["url"] == "https://hooks.example/in"
    assert Sealer.from_settings(Settings(webhook_secret=SecretStr("s" * 16))).key is not None


def entry(tenant: str, secret: str | None = None) -> KeyEntry:
    return KeyEntry(
        key=f"key-of-{tenant}",
        tenant=tenant,
        webhook_secret=None if secret is None else SecretStr(secret),
    )


def test_each_tenant_signs_with_its_own_secret_and_the_shared_one_only_without_keys():
    settings = Settings(webhook_secret=SecretStr("shared-secret-0000"))
    keys = KeyRing(entries=(entry("a", "secret-of-a-00000"), entry("b")), open=False)
    signing = SigningKeys.of(settings, keys)
    target = Sealer(KEY).open(
        "j", WebhookConfig.of({"webhook": Sealer(KEY).record("j", "a", HOOK)})
    )
    assert signing.secret_for(target) == "secret-of-a-00000"
    other = Sealer(KEY).open("j", WebhookConfig.of({"webhook": Sealer(KEY).record("j", "b", HOOK)}))
    assert signing.secret_for(other) is None  # a tenant without a secret: unsigned
    plain = Sealer(KEY).open("j", HOOK)
    assert signing.secret_for(plain) == "shared-secret-0000"  # a Kafka producer's webhook
    open_gateway = SigningKeys.of(settings, KeyRing())
    assert open_gateway.secret_for(target) == "shared-secret-0000"


def test_tenant_secrets_without_a_seal_key_do_not_start():
    keys = KeyRing(entries=(entry("a", "secret-of-a-00000"),), open=False)
    with pytest.raises(ConfigurationError, match="CRAWL_WEBHOOK_SEAL_KEY"):
        Sealer(None).check(keys)
    Sealer(KEY).check(keys)


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://127.0.0.1:8080/a?token=x", "http://127.0.0.1:8080"),
        ("HTTPS://Hooks.Example/x", "https://hooks.example:443"),
        ("http://[::1]:9/x", "http://[::1]:9"),
        ("http://[::1/x", "invalid"),
    ],
)
def test_a_receiver_is_named_by_its_origin_never_its_path_or_query(url, origin):
    assert origin_of(url) == origin
