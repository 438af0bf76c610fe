"""The egress proxy's refusals are remembered by host and port, so a fetch can ask about them."""

from __future__ import annotations

import asyncio

from service.egress.proxy import EgressProxy, ProxyCredential
from service.egress.refusals import RefusedTargets
from service.net.policy import UrlPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_connect_refusal_answers_for_https_urls_of_that_host_and_port():
    refusals = RefusedTargets()
    since = refusals.now()
    refusals.record("127.0.0.2:8443", "loopback")
    refusals.record("[::1]:443", "loopback")
    refusals.record("Example.COM:443", "private")
    assert refusals.reason_since("https://127.0.0.2:8443/x?y", since) == "loopback"
    assert refusals.reason_since("https://[::1]/", since) == "loopback"
    assert refusals.reason_since("https://example.com/", since) == "private"
    assert refusals.reason_since("https://127.0.0.2:8444/", since) is None
    assert refusals.reason_since("https://127.0.0.3:8443/", since) is None


def test_a_plain_request_refusal_is_remembered_by_its_url():
    refusals = RefusedTargets()
    refusals.record("http://10.0.0.1/latest", "private")
    assert refusals.reason_since("http://10.0.0.1:80/other", 0.0) == "private"


def test_only_refusals_since_the_page_started_count():
    clock = Clock()
    refusals = RefusedTargets(clock=clock)
    refusals.record("127.0.0.2:443", "loopback")
    clock.now += 5
    since = refusals.now()
    assert refusals.reason_since("https://127.0.0.2/", since) is None
    refusals.record("127.0.0.2:443", "loopback")
    assert refusals.reason_since("https://127.0.0.2/", since) == "loopback"


def test_the_oldest_refusals_are_forgotten_past_the_capacity():
    refusals = RefusedTargets(capacity=2)
    for port in (1, 2, 3):
        refusals.record(f"10.0.0.1:{port}", "private")
    assert refusals.reason_since("https://10.0.0.1:1/", 0.0) is None
    assert refusals.reason_since("https://10.0.0.1:3/", 0.0) == "private"


def test_garbage_targets_are_ignored():
    refusals = RefusedTargets()
    for target in ("", "no-port", "host:notaport", "http://[::1/", "*"):
        refusals.record(target, "private")
    assert refusals.reason_since("not a url", 0.0) is None


async def test_the_proxy_records_a_connect_refusal_before_the_browser_reads_the_403():
    """Whoever reads the refusal finds it recorded: the proxy reports it before answering."""
    refusals = RefusedTargets()
    since = refusals.now()
    credential = ProxyCredential(username="worker", password="s3cret")  # noqa: S106
    policy = UrlPolicy.create()
    async with EgressProxy(policy, credential=credential, on_blocked=refusals.record) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        auth = f"Proxy-Authorization: {credential.header_value}\r\n".encode()
        try:
            async with asyncio.timeout(10):
                writer.write(
                    b"CONNECT 127.0.0.2:8443 HTTP/1.1\r\nHost: 127.0.0.2:8443\r\n" + auth + b"\r\n"
                )
                head = await reader.readuntil(b"\r\n\r\n")
                seen = refusals.reason_since("https://127.0.0.2:8443/", since)
        finally:
            writer.close()
    assert head.startswith(b"HTTP/1.1 403")
    assert seen == "loopback"
