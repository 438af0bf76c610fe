"""A dead letter's copy of a request or a page task keeps no credential (pure)."""

from __future__ import annotations

import json

from service.messaging.redact import REDACTED, redacted, without_secrets, without_user_info

REQUEST = {
    "request_id": "r-1",
    "urls": ["http://site.test/a@b"],
    "options": {
        "timeout_ms": 5,
        "proxy": "http://crawler:pw-123@proxy.test:3128",
        "headers": {"Authorization": "Bearer tok-456"},
        "cookies": [{"name": "sid", "value": "ck-789", "domain": "site.test"}],
    },
    "metadata": {
        "order": 7,
        "webhook": {"url": "https://hooks.test/in?token=wt-1#f", "headers": {"X-Key": "wh-2"}},
    },
}


def test_a_requests_credentials_read_redacted_and_everything_else_is_kept():
    """Proxy user info, header and cookie values, a webhook's headers and token are
    redacted and named; the rest of the request is as it was."""
    value, fields = redacted(json.dumps(REQUEST).encode())
    text = value.decode()
    for secret in ("pw-123", "crawler", "tok-456", "ck-789", "wt-1", "wh-2"):
        assert secret not in text
    assert fields == ["options.headers", "options.cookies", "options.proxy", "metadata.webhook"]
    document = json.loads(value)
    assert document["options"]["proxy"] == f"http://{REDACTED}@proxy.test:3128"
    assert document["options"]["headers"] == {"Authorization": REDACTED}
    assert document["options"]["cookies"][0]["name"] == "sid"
    assert document["metadata"]["order"] == 7
    assert document["metadata"]["webhook"]["url"] == f"https://hooks.test/in?{REDACTED}#{REDACTED}"
    assert document["urls"] == REQUEST["urls"]
    assert document["options"]["timeout_ms"] == 5


def test_a_page_tasks_options_and_echoed_webhook_are_redacted():
    task = {
        "request_id": "r-1",
        "options": {"proxy": "socks5://u:p-1@10.0.0.1:1080"},
        "request_metadata": {"webhook": "https://u:p-2@hooks.test/in?t=p-3"},
    }
    value, fields = redacted(json.dumps(task).encode())
    assert fields == ["options.proxy", "request_metadata.webhook"]
    for secret in ("p-1", "p-2", "p-3"):
        assert secret not in value.decode()


def test_a_value_without_credentials_or_not_json_is_kept_byte_for_byte():
    plain = b'{"request_id": "r-2", "urls": ["http://a/"], "options": {"proxy": "pool-a"}}'
    sealed = b'{"request_id": "r-3", "metadata": {"webhook": {"sealed": "v1.xyz"}}}'
    for value in (plain, sealed, b"{not json", b"[1, 2]", b"\xff", b"[" * 100_000):
        assert redacted(value) == (value, [])


def test_urls_lose_their_user_info_and_a_webhooks_query_but_not_their_path():
    assert without_user_info("http://proxy.test:3128") == "http://proxy.test:3128"
    assert without_user_info("http://u@proxy.test") == f"http://{REDACTED}@proxy.test"
    assert without_secrets("https://hooks.test/a@b") == "https://hooks.test/a@b"
    assert without_secrets("http://[::1") == REDACTED
