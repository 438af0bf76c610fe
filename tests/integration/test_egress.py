"""Egress that nothing gets around: WebRTC sends no packet past the proxy, and the proxy
serves only its own worker's browser."""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
import uuid
from typing import TYPE_CHECKING

import aiohttp
import pytest
from flood import flooding
from harness import produce
from listeners import ipv6_loopback_available, listening, local_ipv4_addresses, mdns_queries
from testsite import serve

from service.contracts import CrawlOptions, CrawlRequest, EventType, dump

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from conftest import SharedRun
    from testsite import TestSite

pytestmark = pytest.mark.integration

DEADLINE_S = 10.0
"""Longest wait for one answer of the proxy."""

FLOOD_DEADLINE_S = 300.0
"""Longest the flood may take to open (or fail to open) all its connections."""

MAX_LOG_LINES_GROWN = 300
"""Lines the worker's log may grow by during the flood and the two requests."""


@pytest.fixture(scope="module")
async def keep_alive() -> AsyncIterator[tuple[int, list[bytes]]]:
    """The keep-alive site (see `keep_alive_site`), for the module: its port is on the shared
    worker's allowlist."""
    async with keep_alive_site() as running:
        yield running


@pytest.fixture
async def run(
    shared_worker_with: Callable[..., Awaitable[SharedRun]],
    site: TestSite,
    keep_alive: tuple[int, list[bytes]],
) -> SharedRun:
    """One worker, on topics and a group of its own, for the tests that neither configure nor
    stress their worker (each tells its work apart by request id), with the test site and the
    keep-alive site allowlisted."""
    hosts = f"127.0.0.1:{site.port},127.0.0.1:{keep_alive[0]}"
    return await shared_worker_with(CRAWL_ALLOWED_HOSTS=hosts)


def _request(request_id: str, urls: list[str], **options: object) -> tuple[bytes, bytes]:
    request = CrawlRequest(request_id=request_id, urls=urls, options=CrawlOptions(**options))
    return request_id.encode(), dump(request)


async def test_webrtc_sends_no_packet_to_any_address_the_policy_forbids(run, site):
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
        topics, collector = run.topics, run.collector
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


async def _proxy_port(worker) -> int:
    started = await worker.wait_for_log("proxy.started", deadline_s=10)
    return int(started["port"])


async def _raw_exchange(port: int, request: bytes) -> bytes:
    """The status line the proxy answers `request` with, from a plain socket."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(DEADLINE_S):
            writer.write(request)
            return (await reader.readline()).strip()
    finally:
        writer.close()


async def test_another_local_process_cannot_use_the_egress_proxy(run, site):
    """From outside the worker, with no credential: a plain request to the allowlisted site,
    a CONNECT to it and a CONNECT to port 25 of a public address all get 407; the site never
    sees the requests."""
    port = await _proxy_port(run.worker)
    proxy = f"http://127.0.0.1:{port}"
    before = sum(site.hits.values())
    async with aiohttp.ClientSession() as session:
        async with session.get(site.url("/page/7"), proxy=proxy) as response:
            assert response.status == 407
            assert response.headers["Proxy-Authenticate"].startswith("Basic ")
        with pytest.raises(aiohttp.ClientHttpProxyError) as caught:
            await session.get(f"https://127.0.0.1:{site.port}/", proxy=proxy)
        assert caught.value.status == 407
    smtp = b"CONNECT 93.184.216.34:25 HTTP/1.1\r\nHost: 93.184.216.34:25\r\n\r\n"
    assert await _raw_exchange(port, smtp) == b"HTTP/1.1 407 Proxy Authentication Required"
    assert sum(site.hits.values()) == before


WORKER_DESCRIPTORS = 4_096
"""The flooded worker's descriptor limit (this machine's is 20,000): what the test proves is
that a flood larger than the limit leaves the worker crawling, and the flood's cost grows with
the limit, so the worker gets a smaller one."""

FLOOD = 5_000
"""Connections a hostile local process opens at the proxy: more than the worker has
descriptors."""


def _descriptor_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (WORKER_DESCRIPTORS, WORKER_DESCRIPTORS))


async def test_a_connection_flood_leaves_the_worker_crawling_with_bounded_logs(
    topics, collector, site, start_worker
):
    """5,000 idle connections at the proxy from other processes (more than the worker's
    descriptor limit of 4,096): the proxy closes those past its cap at once and says so in a
    few log lines; a request produced during the flood completes, and once the flood ends
    pages render again."""
    worker = await start_worker(preexec=_descriptor_limit)
    assert FLOOD > WORKER_DESCRIPTORS
    port = await _proxy_port(worker)
    log_lines = len(worker.log_path.read_text().splitlines())
    async with flooding("127.0.0.1", port, FLOOD) as flood:
        await flood.wait(f"opened:{FLOOD // 5}", FLOOD_DEADLINE_S)
        await produce(topics, [_request("during-flood", [site.url("/page/11")])])
        await flood.wait("done", FLOOD_DEADLINE_S)
        await collector.wait_until(lambda seen: seen.terminal("during-flood"), deadline_s=180)
        assert (flood.opened, flood.failed) == (FLOOD, 0)
    [terminal] = collector.seen.terminal("during-flood")
    assert terminal.type == EventType.COMPLETED
    [during] = collector.seen.results_of("during-flood")

    await produce(topics, [_request("after-flood", [site.url("/page/12")])])
    await collector.wait_until(lambda seen: seen.terminal("after-flood"), deadline_s=120)
    [after] = collector.seen.results_of("after-flood")
    assert after.ok, after.error

    assert worker.process.returncode is None
    events = worker.events()
    lines = worker.log_path.read_text().splitlines()
    grown = len(lines) - log_lines
    assert grown < MAX_LOG_LINES_GROWN, (grown, lines[-20:])
    refused = sum(e.get("refused", 0) for e in events if e.get("event") == "proxy.saturated")
    assert refused > 0
    assert not [line for line in lines if "Too many open files" in line]
    print(f"flood: {refused} refused in the log, log +{grown} lines, during: {during.error}")  # noqa: T201


HOGS = 4
"""Requests whose page opens hundreds of connections at once. Chromium here lets one context
hold 128 WebSockets and 6 fetches at the proxy: four such pages filled its cap of 512 on the
old code (169 connections refused in 15 s)."""

HOG_CONNECTIONS = 200
"""WebSockets and hanging fetches each hog page opens (each)."""

HOG_WEBSOCKETS_OPENED = HOGS * 120
"""WebSocket handshakes the site sees once the hogs hold what they can (488 on the old code,
where they filled the proxy)."""

HOG_WEBSOCKETS_HELD = HOGS * 100
"""The least the hogs hold when their count stops short of `HOG_WEBSOCKETS_OPENED`: on a
slower machine four hogs had made 453 handshakes (113 a context) when a wait for 480 ran
out after 180 s."""

HOLD_QUIET_S = 10.0
"""How long the count must stay unchanged to be what the hogs hold."""

HOLD_DEADLINE_S = 180.0


async def _hogs_hold(handshakes: Callable[[], int]) -> None:
    """Until the hogs hold what they can: `HOG_WEBSOCKETS_OPENED` handshakes, or a count of at
    least `HOG_WEBSOCKETS_HELD` that has not grown for `HOLD_QUIET_S`."""
    async with asyncio.timeout(HOLD_DEADLINE_S):
        last, since = handshakes(), time.monotonic()
        while (now := handshakes()) < HOG_WEBSOCKETS_OPENED:
            if now != last:
                last, since = now, time.monotonic()
            elif now >= HOG_WEBSOCKETS_HELD and time.monotonic() - since >= HOLD_QUIET_S:
                return
            await asyncio.sleep(0.2)


HOG_TIMEOUT_MS = 240_000
"""The hog pages wait for a selector that never comes, for longer than the test runs: they
are still open, holding what they can, when the other request is crawled."""


async def test_a_page_that_hogs_connections_starves_only_its_own_request(
    topics, collector, site, start_worker
):
    """Four requests whose page opens 200 WebSockets and 200 fetches that are never answered
    each: while they hold all they can, another request's page (on another host, so the
    per-host page limit does not queue it behind them) renders `ok`, and the proxy never
    refuses a connection: each hog holds at most its context's share."""
    async with serve("127.0.0.2") as other:
        # Not the defaults, so that the hogs outlast the test: a page deadline above the
        # default cap (60 s), and no settle wait (with it, in some runs here the hogs ended
        # as `timeout` within 15 s, before the other request was produced; in others they
        # held for minutes: not investigated, see the issue 19 item 8 report).
        worker = await start_worker(
            CRAWL_MAX_PAGE_TIMEOUT=str(HOG_TIMEOUT_MS // 1000),
            CRAWL_RENDER_SETTLE="0",
            CRAWL_ALLOWED_HOSTS=f"127.0.0.1:{site.port},127.0.0.2:{other.port}",
        )
        hog = site.url(f"/abuse/hog?count={HOG_CONNECTIONS}")
        opened = site.hits["/abuse/ws-hold"]
        await produce(
            topics,
            [
                _request(f"hog-{n}", [hog], wait_for="#never", timeout_ms=HOG_TIMEOUT_MS)
                for n in range(HOGS)
            ],
        )
        await _hogs_hold(lambda: site.hits["/abuse/ws-hold"] - opened)
        await produce(topics, [_request("bystander", [other.url("/page/21")])])
        await collector.wait_until(lambda seen: seen.terminal("bystander"), deadline_s=180)
    [result] = collector.seen.results_of("bystander")
    assert result.ok, result.error
    assert not any(collector.seen.terminal(f"hog-{n}") for n in range(HOGS))
    saturated = [e for e in worker.events() if e.get("event") == "proxy.saturated"]
    assert saturated == []


KEEP_ALIVE_PAGE = b"<!doctype html><title>Keep-alive</title><h1>Kept alive</h1>" + b"".join(
    f'<img src="/img/{n}.png" alt="">'.encode() for n in range(6)
)
"""The keep-alive site's page: its images are further requests on the browser's connections."""


@contextlib.asynccontextmanager
async def keep_alive_site() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A raw HTTP site on 127.0.0.1 that answers every request head on a connection and keeps
    the connection open, whatever `Connection: close` says; yields (port, heads received)."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                heads.append(head)
                body = KEEP_ALIVE_PAGE if head.startswith(b"GET / ") else b"x"
                kind = b"text/html" if head.startswith(b"GET / ") else b"image/png"
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: "
                    + kind
                    + b"\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\nConnection: keep-alive\r\n\r\n"
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1], heads


async def test_a_site_that_keeps_connections_alive_never_sees_the_proxy_credential(run, keep_alive):
    """Through Chromium: a page and its six images from a site that ignores `Connection:
    close`; the page is ok and no request the site receives carries `Proxy-Authorization`
    or is in absolute form (each went through the proxy's own parsing)."""
    port, heads = keep_alive
    heads.clear()
    topics, collector = run.topics, run.collector
    await produce(topics, [_request("keep-alive", [f"http://127.0.0.1:{port}/"])])
    await collector.wait_until(lambda seen: seen.terminal("keep-alive"), deadline_s=120)
    [result] = collector.seen.results_of("keep-alive")
    assert result.ok, result.error
    assert len(heads) >= 2  # the page and at least one image
    assert [head for head in heads if b"proxy-authorization" in head.lower()] == []
    assert [head for head in heads if not head.startswith(b"GET /")] == []
