"""A Kafka producer's webhook with credentials is sealed at intake, never echoed (pure)."""

from __future__ import annotations

import json

import pytest

from service.contracts import CrawlRequest
from service.contracts_webhook import SealedWebhook, WebhookConfig
from service.errors import RejectedMessageError
from service.sealing.echo import sealed_echo
from service.sealing.seal import derive
from service.sealing.targets import Sealer, SigningKeys
from service.settings import Settings
from service.worker.coordinator.intake import parse_request

SEALER = Sealer(derive(b"a seal key of the test"))
HOOK = {"url": "https://hooks.test/in?token=tok-1", "headers": {"X-Key": "hdr-2"}}


def request(webhook: object) -> CrawlRequest:
    return CrawlRequest(request_id="r-1", urls=["https://a.test/"], metadata={"webhook": webhook})


def test_a_producers_webhook_with_credentials_is_sealed_and_the_dispatcher_opens_it():
    """The echo holds neither the header nor the token; the dispatcher gets both back, with
    no tenant (signed with the shared secret)."""
    echoed = sealed_echo(request(HOOK | {"metadata": {"order": 7}}), SEALER)
    text = json.dumps(echoed.metadata)
    assert "tok-1" not in text
    assert "hdr-2" not in text
    hook = WebhookConfig.of(echoed.metadata)
    assert isinstance(hook, SealedWebhook)
    assert hook.metadata == {"order": 7}
    target = SEALER.open("r-1", hook)
    assert (target.url, dict(target.headers), target.tenant) == (HOOK["url"], HOOK["headers"], None)
    assert SigningKeys(shared="whsec", tenants={"t": "other"}, keyed=True).secret_for(target) == (
        "whsec"
    )


@pytest.mark.parametrize(
    "webhook",
    ["https://hooks.test/in", {"url": "https://hooks.test/in", "events": ["completed"]},
     {"sealed": "v1.abc"}, {"url": 5}],
)  # fmt: skip
def test_a_webhook_without_credentials_sealed_already_or_unreadable_is_echoed_as_given(webhook):
    given = request(webhook)
    assert sealed_echo(given, SEALER) is given
    assert sealed_echo(given, Sealer(None)) is given


def test_without_a_seal_key_a_webhook_with_credentials_is_rejected_naming_the_field():
    with pytest.raises(RejectedMessageError) as caught:
        sealed_echo(request(HOOK), Sealer(None))
    assert caught.value.code == "invalid_request"
    assert caught.value.request_id == "r-1"
    assert caught.value.message.startswith("metadata.webhook")
    assert "tok-1" not in caught.value.message


def test_intake_seals_with_the_workers_webhook_secret():
    value = json.dumps({"request_id": "r-2", "urls": ["https://a.test/"],
                        "metadata": {"webhook": HOOK}}).encode()  # fmt: skip
    parsed = parse_request(value, Settings(webhook_secret="whsec-0123456789abcdef"))  # noqa: S106
    assert "hdr-2" not in json.dumps(parsed.metadata)
    with pytest.raises(RejectedMessageError):
        parse_request(value, Settings())
