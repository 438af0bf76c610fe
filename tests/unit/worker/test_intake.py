"""Every kind of bad message gets a precise rejection code; good ones parse."""

from __future__ import annotations

import json

import pytest

from service.errors import RejectedMessageError
from service.settings import Settings
from service.worker.coordinator.intake import parse_request

SETTINGS = Settings(max_urls_per_request=3, max_request_bytes=2000)


@pytest.mark.parametrize(
    ("value", "code", "request_id"),
    [
        (None, "empty", None),
        (b"\xff\xfe", "not_utf8", None),
        (b"{not json", "not_json", None),
        (b"[1, 2]", "not_object", None),
        (
            b'{"request_id": "ok-1", "urls": ["http://a/"], "schema_version": 9}',
            "unsupported_schema_version",
            "ok-1",
        ),
        (b'{"request_id": "ok-2", "urls": ["http://a/"], "extra": 1}', "invalid_request", "ok-2"),
        (b'{"request_id": "bad id", "urls": ["http://a/"]}', "invalid_request", None),
        (b'{"request_id": "ok-3", "urls": "http://a/"}', "invalid_request", "ok-3"),
        (
            json.dumps(
                {"request_id": "ok-4", "urls": [f"http://a/{i}" for i in range(4)]}
            ).encode(),
            "invalid_request",
            "ok-4",
        ),
        (b'{"request_id": "big", "urls": ["http://a/' + b"x" * 3000 + b'"]}', "too_large", None),
    ],
)
def test_bad_messages_are_rejected_with_a_code(value, code, request_id):
    """The code says what is wrong; the request_id is kept when it can be read."""
    with pytest.raises(RejectedMessageError) as caught:
        parse_request(value, SETTINGS)
    assert (caught.value.code, caught.value.request_id) == (code, request_id)


def test_good_message_parses_and_keeps_odd_schemes_for_the_policy():
    """A valid request parses; a non-http URL stays in to get a `blocked` result."""
    value = b'{"request_id": "fine", "urls": ["http://a/", "javascript:alert(1)"]}'
    request = parse_request(value, SETTINGS)
    assert request.urls == ["http://a/", "javascript:alert(1)"]


@pytest.mark.parametrize(
    "options",
    [
        {"include_tags": ["main", "a["]},
        {"exclude_tags": ["div >"]},
        {"extract": {"base_selector": "li:::x", "fields": [{"name": "n"}]}},
        {
            "extract": {
                "fields": [
                    {
                        "name": "n",
                        "selector": "h2",
                        "type": "nested",
                        "fields": [{"name": "m", "selector": "li:nth-child(x)"}],
                    }
                ]
            }
        },
    ],
)
def test_a_selector_that_does_not_parse_is_rejected_as_invalid_selector(options):
    """Shaping and schema selectors are judged at intake by the engine that applies them."""
    value = json.dumps({"request_id": "sel", "urls": ["http://a/"], "options": options})
    with pytest.raises(RejectedMessageError) as caught:
        parse_request(value.encode(), SETTINGS)
    assert (caught.value.code, caught.value.request_id) == ("invalid_selector", "sel")
    assert "is not a CSS selector" in str(caught.value)


def _with_options(options: dict[str, object]) -> bytes:
    return json.dumps({"request_id": "r", "urls": ["https://a.test/"], "options": options}).encode()


def test_a_proxy_pool_must_be_one_of_the_worker_s_and_a_url_s_password_is_not_echoed():
    settings = Settings(proxies={"office": ["http://u:pw@10.0.0.5:3128"]})
    assert parse_request(_with_options({"proxy": "office"}), settings).options.proxy == "office"
    with pytest.raises(RejectedMessageError) as rejected:
        parse_request(_with_options({"proxy": "home"}), settings)
    assert rejected.value.code == "invalid_request"
    assert "'home'" in rejected.value.message
    assert "'office'" in rejected.value.message
    with pytest.raises(RejectedMessageError) as bad_url:
        parse_request(_with_options({"proxy": "ftp://u:hunter2@p.test"}), settings)
    assert "hunter2" not in bad_url.value.message


def test_skipping_tls_verification_is_rejected_unless_the_worker_allows_it():
    """`skip_tls_verification` is `invalid_request` naming the setting on a worker without
    `CRAWL_ALLOW_INSECURE_TLS`; a worker with it takes the request."""
    value = json.dumps(
        {"request_id": "tls-1", "urls": ["https://a/"], "options": {"skip_tls_verification": True}}
    ).encode()
    with pytest.raises(RejectedMessageError) as caught:
        parse_request(value, SETTINGS)
    assert (caught.value.code, caught.value.request_id) == ("invalid_request", "tls-1")
    assert "CRAWL_ALLOW_INSECURE_TLS" in str(caught.value)
    allowing = SETTINGS.model_copy(update={"allow_insecure_tls": True})
    assert parse_request(value, allowing).options.skip_tls_verification
