"""Webhook bodies, event ids and signatures (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from service.contracts import EventType, ProgressEvent
from service.contracts_webhook import WebhookConfig
from service.webhooks.payloads import hook_of, signature, verify, webhook_event


def event(kind: EventType, result_id: str | None = None, detail: str | None = None):
    return ProgressEvent(
        request_id="job-1",
        run_id="run-1",
        seq=1,
        type=kind,
        total=1,
        succeeded=1,
        failed=0,
        at=datetime(2026, 12, 1, tzinfo=UTC),
        worker="w1",
        result_id=result_id,
        detail=detail,
    )


def test_the_signature_is_firecrawls_hmac_sha256_of_the_raw_body():
    # printf '{"a":1}' | openssl dgst -sha256 -hmac key
    expected = "sha256=88a67f24bbcdaed0e6c997404bb79a743baf44c6bab2f4c27328e3009d22e342"
    assert signature("key", b'{"a":1}') == expected
    assert verify("key", b'{"a":1}', signature("key", b'{"a":1}'))
    assert not verify("key", b'{"a":2}', signature("key", b'{"a":1}'))
    assert not verify("other", b'{"a":1}', signature("key", b'{"a":1}'))


def test_events_map_to_hooks_the_request_asked_for_with_stable_ids():
    config = WebhookConfig(url="https://hooks.example/", events=("page", "completed"))
    assert hook_of(event(EventType.ACCEPTED), config) is None
    assert hook_of(event(EventType.PAGE_FAILED), config) is None
    assert hook_of(event(EventType.PAGE_SUCCEEDED, "r1"), config) == "page"
    page = webhook_event(
        event(EventType.PAGE_SUCCEEDED, "r1"), "page", config, prefix="crawl", data=[]
    )
    again = webhook_event(
        event(EventType.PAGE_SUCCEEDED, "r1"), "page", config, prefix="crawl", data=[]
    )
    assert page.id == again.id == "job-1:r1"
    assert page.body["type"] == "crawl.page"


def test_a_failed_job_says_why_and_a_bare_url_is_a_config():
    config = WebhookConfig.of({"webhook": "https://hooks.example/"})
    assert config is not None
    assert config.events == ("started", "page", "completed", "failed")
    failed = webhook_event(
        event(EventType.CANCELLED, detail="cancelled: by user"),
        "failed",
        config,
        prefix="batch_scrape",
        data=[],
    )
    assert failed.body["success"] is False
    assert failed.body["error"] == "cancelled: by user"
    assert failed.body["type"] == "batch_scrape.failed"
    assert WebhookConfig.of({}) is None
