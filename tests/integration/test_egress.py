"""Egress that nothing gets around: WebRTC sends no packet past the proxy, and the proxy
serves only its own worker's browser."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from harness import produce
from listeners import ipv6_loopback_available, listening, local_ipv4_addresses, mdns_queries

from service.contracts import CrawlOptions, CrawlRequest, dump

pytestmark = pytest.mark.integration


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


async def test_webrtc_sends_no_packet_to_any_address_the_policy_forbids(
    topics, collector, site, start_worker
):
    """A page on an allowed host that uses STUN, TURN over UDP, TCP and TLS, forged remote
    candidates (addresses, `localhost`, a `.local` name) and WebTransport towards loopback and
    this machine's own addresses renders `ok`, and not one packet reaches those addresses."""
    hosts = ["127.0.0.2", "127.0.0.1"]
    if ipv6_loopback_available():
        hosts.append("::1")
    interfaces = local_ipv4_addresses()
    # a machine with no address but loopback has nothing more to probe
    hosts += interfaces[:1]
    name = f"crawlstream-{uuid.uuid4().hex[:12]}"
    async with contextlib.AsyncExitStack() as stack:
        listeners = [await stack.enter_async_context(listening(host)) for host in hosts]
        mdns = None
        if interfaces:
            mdns = await stack.enter_async_context(mdns_queries(name, interfaces[0]))
        loopback = next(listener for listener in listeners if listener.host == "127.0.0.1")
        targets = [listener.target for listener in listeners] + [f"localhost:{loopback.port}"]
        page = site.url(f"/hostile/webrtc?name={name}&targets={','.join(targets)}")
        await start_worker()
        await produce(
            topics,
            [_request("rtc-1", [page], wait_for="#webrtc-done", formats=["text"])],
        )
        await collector.wait_until(lambda seen: seen.terminal("rtc-1"), deadline_s=120)

        [result] = collector.seen.results_of("rtc-1")
        received = {
            f"{listener.target} {kind}": count
            for listener in listeners
            for kind, count in (
                ("tcp", listener.counts.tcp_connections),
                ("udp", listener.counts.udp_datagrams),
            )
        }
        if mdns is not None:
            received[f"mdns {name}"] = mdns.total
        assert received == dict.fromkeys(received, 0)
        assert result.ok, result.error
        for target in targets:  # every peer connection finished gathering, none threw
            assert f"{target}: 0 local candidates" in (result.text or ""), result.text
