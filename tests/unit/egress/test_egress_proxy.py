"""The egress proxy against real sockets, on 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from structlog.testing import capture_logs

from service.egress.proxy import EgressProxy, ProxyCredential, ProxyTimeouts
from service.net.policy import UrlPolicy

DEADLINE_S = 10.0

CREDENTIAL = ProxyCredential(username="worker", password="s3cret")  # noqa: S106
"""The credential of every proxy these tests start."""

AUTH = f"Proxy-Authorization: {CREDENTIAL.header_value}"


@dataclass
class Origin:
    port: int
    hits: list[web.Request] = field(default_factory=list)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


async def _start_origin(stack: list[web.AppRunner]) -> Origin:
    origin = Origin(port=0)

    async def echo(request: web.Request) -> web.StreamResponse:
        origin.hits.append(request)
        if request.path == "/ws":
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await ws.send_str("hello over websocket")
            await ws.close()
            return ws
        body = await request.read()
        return web.Response(text=f"{request.method} {request.path_qs} {len(body)}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    stack.append(runner)
    origin.port = runner.addresses[0][1]
    return origin


@pytest.fixture
async def origins():
    """Two local origins: `allowed` is on the allowlist, `other` is not."""
    runners: list[web.AppRunner] = []
    pair = (await _start_origin(runners), await _start_origin(runners))
    yield pair
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
def blocked_log() -> list[tuple[str, str]]:
    """What the proxy reported through `on_blocked`."""
    return []


@pytest.fixture
async def proxy(origins, blocked_log):
    allowed, _ = origins
    policy = UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{allowed.port}"])
    async with EgressProxy(
        policy, credential=CREDENTIAL, on_blocked=lambda *args: blocked_log.append(args)
    ) as running:
        yield running


async def exchange(
    port: int, data: bytes, *, then: bytes = b"", until: bytes | None = None
) -> tuple[Reply, bytes]:
    """Send `data` and read the reply head; send `then` and read to the end (or to `until`)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(DEADLINE_S):
            writer.write(data)
            head = await reader.readuntil(b"\r\n\r\n")
            writer.write(then)
            rest = await (reader.readuntil(until) if until else reader.read())
    finally:
        writer.close()
    return _reply(head, rest), rest


def _reply(head: bytes, rest: bytes) -> Reply:
    status_line, *lines = head.decode("latin-1").strip().split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Reply(status=int(status_line.split(" ")[1]), headers=headers, body=rest)


def get(url: str, *extra: str, auth: str = AUTH) -> bytes:
    lines = [f"GET {url} HTTP/1.1", "Host: ignored.example", auth, *extra, "", ""]
    return "\r\n".join(lines).encode()


def connect(authority: str, auth: str = AUTH) -> bytes:
    return f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n\r\n".encode()


def authorized(raw: bytes) -> bytes:
    """`raw` with the credential added after its first line."""
    line, sep, rest = raw.partition(b"\r\n")
    return line + sep + AUTH.encode() + b"\r\n" + rest if sep else raw


def inner_get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: inner\r\nConnection: close\r\n\r\n".encode()


async def test_an_allowlisted_plain_request_is_forwarded_in_origin_form(proxy, origins):
    """The origin sees an origin-form request, its own Host, no proxy headers, one request."""
    allowed, _ = origins
    reply, _ = await exchange(
        proxy.port,
        get(
            f"http://127.0.0.1:{allowed.port}/page?x=1#frag",
            "Proxy-Connection: keep-alive",
            "X-Kept: yes",
        ),
    )
    assert reply.status == 200
    assert reply.body == b"GET /page?x=1 0"
    [request] = allowed.hits
    assert request.headers["Host"] == f"127.0.0.1:{allowed.port}"
    assert request.headers["X-Kept"] == "yes"
    assert request.headers["Connection"] == "close"
    assert "Proxy-Connection" not in request.headers
    assert "Proxy-Authorization" not in request.headers


async def test_a_request_body_is_forwarded(proxy, origins):
    allowed, _ = origins
    body = b"a" * 100_000
    head = (
        f"POST http://127.0.0.1:{allowed.port}/upload HTTP/1.1\r\n"
        f"Host: x\r\n{AUTH}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    reply, _ = await exchange(proxy.port, head + body)
    assert reply.status == 200
    assert reply.body == b"POST /upload 100000"


async def test_an_allowlisted_connect_opens_a_tunnel(proxy, origins):
    allowed, _ = origins
    reply, rest = await exchange(
        proxy.port, connect(f"127.0.0.1:{allowed.port}"), then=inner_get("/tunnelled")
    )
    assert reply.status == 200
    assert rest.startswith(b"HTTP/1.1 200 OK")
    assert rest.endswith(b"GET /tunnelled 0")
    assert [hit.path for hit in allowed.hits] == ["/tunnelled"]


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/secret",
        "http://2130706433:{port}/secret",
        "http://0x7f.1:{port}/secret",
        "http://localhost:{port}/secret",
        "http://[::ffff:127.0.0.1]:{port}/secret",
    ],
)
async def test_a_loopback_port_off_the_allowlist_gets_403_and_no_traffic(
    proxy, origins, blocked_log, target
):
    """The target server sees nothing; the browser gets a 403 naming the reason."""
    _, other = origins
    url = target.format(port=other.port)
    reply, _ = await exchange(proxy.port, get(url))
    assert reply.status == 403
    assert "loopback" in reply.headers["x-crawlstream-blocked"]
    assert other.hits == []
    assert proxy.blocked_total == 1
    assert blocked_log == [(url, reply.headers["x-crawlstream-blocked"])]


async def test_a_connect_to_a_loopback_port_off_the_allowlist_gets_403(proxy, origins, blocked_log):
    _, other = origins
    authority = f"127.0.0.1:{other.port}"
    reply, _ = await exchange(proxy.port, connect(authority), then=inner_get("/secret"))
    assert reply.status == 403
    assert reply.headers["x-crawlstream-blocked"] == "loopback"
    assert other.hits == []
    assert blocked_log == [(authority, "loopback")]


@pytest.mark.parametrize(
    "request_bytes",
    [get("http://nonexistent.invalid/"), connect("nonexistent.invalid:443")],
)
async def test_an_unresolvable_host_gets_502_dns(proxy, request_bytes):
    reply, _ = await exchange(proxy.port, request_bytes)
    assert reply.status == 502
    assert reply.headers["x-crawlstream-error"] == "dns"
    assert proxy.blocked_total == 0


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_refused_connection_gets_502_connection():
    port = _unused_port()
    policy = UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{port}"])
    async with EgressProxy(policy, credential=CREDENTIAL) as running:
        reply, _ = await exchange(running.port, get(f"http://127.0.0.1:{port}/"))
    assert reply.status == 502
    assert reply.headers["x-crawlstream-error"] == "connection"


async def test_a_connect_past_its_deadline_gets_502_timeout(origins):
    allowed, _ = origins
    policy = UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{allowed.port}"])
    async with EgressProxy(
        policy, credential=CREDENTIAL, timeouts=ProxyTimeouts(connect_s=0)
    ) as running:
        reply, _ = await exchange(running.port, connect(f"127.0.0.1:{allowed.port}"))
    assert reply.status == 502
    assert reply.headers["x-crawlstream-error"] == "timeout"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"hello there\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"GET http://example.com/ HTTP/9\r\n\r\n", 400),
        (b"GET http://example.com/ HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"GET http://example.com/ HTTP/1.1\r\n folded: header\r\n\r\n", 400),
        (b"G(T http://example.com/ HTTP/1.1\r\n\r\n", 400),
        (b"CONNECT example.com HTTP/1.1\r\n\r\n", 400),
        (b"CONNECT example.com:0 HTTP/1.1\r\n\r\n", 400),
        (b"CONNECT [::1:443 HTTP/1.1\r\n\r\n", 400),
        (b"GET https://example.com/ HTTP/1.1\r\n\r\n", 400),
        (b"GET http://example.com:99999/ HTTP/1.1\r\n\r\n", 403),
        (b"GET ftp://example.com/ HTTP/1.1\r\n\r\n", 403),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
    ],
)
async def test_garbage_gets_400_and_other_schemes_403(proxy, request_bytes, status):
    reply, _ = await exchange(proxy.port, authorized(request_bytes))
    assert reply.status == status


async def test_an_oversized_head_gets_400(proxy):
    reply, _ = await exchange(
        proxy.port, b"GET http://example.com/ HTTP/1.1\r\nX: " + b"a" * 100_000
    )
    assert reply.status == 400
    assert b"too large" in reply.body


async def test_a_websocket_upgrade_over_plain_http_is_relayed(proxy, origins):
    allowed, _ = origins
    key = base64.b64encode(os.urandom(16)).decode()
    reply, rest = await exchange(
        proxy.port,
        get(
            f"http://127.0.0.1:{allowed.port}/ws",
            "Connection: Upgrade",
            "Upgrade: websocket",
            "Sec-WebSocket-Version: 13",
            f"Sec-WebSocket-Key: {key}",
        ),
        until=b"hello over websocket",
    )
    assert reply.status == 101
    assert b"hello over websocket" in rest


async def test_a_silent_tunnel_is_closed_after_the_idle_deadline(origins):
    allowed, _ = origins
    policy = UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{allowed.port}"])
    async with EgressProxy(
        policy, credential=CREDENTIAL, timeouts=ProxyTimeouts(idle_s=0.2)
    ) as running:
        reply, rest = await exchange(running.port, connect(f"127.0.0.1:{allowed.port}"))
        assert reply.status == 200
        assert rest == b""


async def test_leaving_the_context_cancels_open_connections(origins):
    """Open tunnels do not outlive the proxy: their tasks are cancelled and awaited."""
    allowed, _ = origins
    policy = UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{allowed.port}"])
    async with EgressProxy(policy, credential=CREDENTIAL) as running:
        reader, writer = await asyncio.open_connection("127.0.0.1", running.port)
        writer.write(connect(f"127.0.0.1:{allowed.port}"))
        async with asyncio.timeout(DEADLINE_S):
            await reader.readuntil(b"\r\n\r\n")
        assert running.active_connections == 1
    assert running.active_connections == 0
    async with asyncio.timeout(DEADLINE_S):
        assert await reader.read() == b""
    writer.close()


async def test_the_port_is_unavailable_outside_the_context():
    running = EgressProxy(UrlPolicy.create())
    with pytest.raises(RuntimeError):
        _ = running.port


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET http://127.0.0.1:{port}/open HTTP/1.1\r\nHost: x\r\n\r\n",
        b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n",
        (  # the right user, a wrong password: worker:s
            b"GET http://127.0.0.1:{port}/open HTTP/1.1\r\n"
            b"Proxy-Authorization: Basic d29ya2VyOnM=\r\n\r\n"
        ),
        b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nProxy-Authorization: Bearer s3cret\r\n\r\n",
        b"CONNECT 93.184.216.34:25 HTTP/1.1\r\n\r\n",
    ],
)
async def test_a_request_without_the_credential_gets_407_and_reaches_nothing(
    proxy, origins, blocked_log, request_bytes
):
    """No credential (or a wrong one): a 407 challenge, before any policy verdict, and the
    target sees nothing, not even an allowlisted one."""
    allowed, _ = origins
    reply, _ = await exchange(
        proxy.port, request_bytes.replace(b"{port}", str(allowed.port).encode())
    )
    assert reply.status == 407
    assert reply.headers["proxy-authenticate"] == 'Basic realm="crawlstream"'
    assert allowed.hits == []
    assert blocked_log == []
    assert proxy.unauthorized_total == 1


async def test_a_connect_to_a_port_that_is_not_an_egress_port_is_refused_before_connecting(
    proxy, blocked_log, monkeypatch
):
    """With the credential, `CONNECT 93.184.216.34:25` (a public address, SMTP) gets 403
    naming the port, and no connection is even tried."""
    attempts: list[object] = []

    async def record(*args: object) -> None:
        attempts.append(args)
        raise AssertionError("the proxy tried to connect")

    monkeypatch.setattr("service.egress.proxy.open_upstream", record)
    for request_bytes in (connect("93.184.216.34:25"), get("http://93.184.216.34:25/")):
        reply, _ = await exchange(proxy.port, request_bytes)
        assert reply.status == 403
        assert reply.headers["x-crawlstream-blocked"] == "port 25 is not an egress port"
    assert attempts == []
    assert [target for target, _ in blocked_log] == [
        "93.184.216.34:25",
        "http://93.184.216.34:25/",
    ]


async def _held(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sends nothing, once the proxy has taken it in."""
    return await asyncio.open_connection("127.0.0.1", port)


async def _closed_by_peer(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(DEADLINE_S):
        try:
            return await reader.read() == b""
        except ConnectionResetError:
            return True


async def _wait_for(condition, what: str) -> None:
    async with asyncio.timeout(DEADLINE_S):
        while not condition():
            await asyncio.sleep(0.01)
    assert condition(), what


async def test_past_the_cap_a_connection_is_closed_at_once_with_one_log_line(origins):
    """With 2 connections held, 50 more are each closed at once, one warning says so, and
    once a held connection ends the next request is served."""
    allowed, _ = origins
    policy = UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{allowed.port}"])
    async with EgressProxy(policy, credential=CREDENTIAL, max_connections=2) as running:
        held = [await _held(running.port) for _ in range(2)]
        await _wait_for(lambda: running.active_connections == 2, "both connections taken in")
        with capture_logs() as logs:
            for _ in range(50):
                reader, writer = await _held(running.port)
                assert await _closed_by_peer(reader)
                writer.close()
        assert running.refused_total == 50
        saturated = [entry for entry in logs if entry["event"] == "proxy.saturated"]
        assert [entry["refused"] for entry in saturated] == [1]
        assert all(entry["log_level"] != "error" for entry in logs)

        held[0][1].close()
        await _wait_for(lambda: running.active_connections == 1, "a slot freed")
        reply, _ = await exchange(running.port, get(f"http://127.0.0.1:{allowed.port}/after"))
        assert reply.status == 200
        for _, writer in held[1:]:
            writer.close()


async def test_a_connection_that_sends_no_head_is_closed_at_its_deadline_and_frees_its_slot():
    policy = UrlPolicy.create()
    timeouts = ProxyTimeouts(head_s=0.2)
    async with EgressProxy(
        policy, credential=CREDENTIAL, max_connections=1, timeouts=timeouts
    ) as running:
        reader, writer = await _held(running.port)
        assert await _closed_by_peer(reader)
        writer.close()
        await _wait_for(lambda: running.active_connections == 0, "the slot was freed")
        assert running.refused_total == 0


@dataclass
class RawOrigin:
    """A raw HTTP origin that answers every request head on a connection with `answer` and
    keeps the connection open, whatever `Connection: close` says."""

    answer: bytes
    port: int = 0
    heads: list[bytes] = field(default_factory=list)


@pytest.fixture
async def raw_origin():
    origin = RawOrigin(answer=b"")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                origin.heads.append(await reader.readuntil(b"\r\n\r\n"))
                writer.write(origin.answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    origin.port = server.sockets[0].getsockname()[1]
    async with server:
        yield origin


@pytest.fixture
async def raw_proxy(raw_origin):
    policy = UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{raw_origin.port}"])
    async with EgressProxy(policy, credential=CREDENTIAL) as running:
        yield running


KEEP_ALIVE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nfirst"


async def test_a_second_request_on_a_connection_never_reaches_a_keep_alive_origin(
    raw_proxy, raw_origin
):
    """An origin that ignores `Connection: close`: the browser gets the answer with
    `Connection: close` and its connection is closed after it; a second request sent on the
    same connection (with the worker's credential) never reaches the origin."""
    raw_origin.answer = KEEP_ALIVE
    url = f"http://127.0.0.1:{raw_origin.port}"
    reader, writer = await asyncio.open_connection("127.0.0.1", raw_proxy.port)
    try:
        async with asyncio.timeout(DEADLINE_S):
            writer.write(get(f"{url}/page"))
            head = await reader.readuntil(b"\r\n\r\n")
            body = await reader.readexactly(5)
            rest = b""
            with contextlib.suppress(ConnectionError):  # a reset is an end too
                writer.write(get(f"{url}/favicon.ico"))
                await writer.drain()
                rest = await reader.read()
    finally:
        writer.close()
    reply = _reply(head, body)
    assert (reply.status, reply.body, rest) == (200, b"first", b"")
    assert reply.headers["connection"] == "close"
    assert len(raw_origin.heads) == 1
    assert raw_origin.heads[0].startswith(b"GET /page HTTP/1.1\r\n")
    assert b"proxy-authorization" not in b"".join(raw_origin.heads).lower()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nX-Crawlstream-Blocked: loopback\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nx-crawlstream-error: dns\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\nX-CRAWLSTREAM-ERROR : connection\nContent-Length: 2\n\nok",
        (
            b"HTTP/1.1 200 OK\r\nX-Other: a\r\n\tX-Crawlstream-Blocked: folded\r\n"
            b"Content-Length: 2\r\n\r\nok"
        ),
    ],
)
async def test_a_sites_copy_of_the_proxys_verdict_headers_never_reaches_the_browser(
    raw_proxy, raw_origin, answer
):
    """Whatever the spelling (case, blank before the colon, bare LF line ends), the browser
    gets the site's page without the proxy's verdict headers."""
    raw_origin.answer = answer
    reply, _ = await exchange(raw_proxy.port, get(f"http://127.0.0.1:{raw_origin.port}/"))
    assert (reply.status, reply.body) == (200, b"ok")
    assert not [name for name in reply.headers if name.startswith("x-crawlstream")]


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n"
                b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
            ),
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        ),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
        (b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n" + KEEP_ALIVE, b"first"),
    ],
)
async def test_an_answer_ends_where_its_framing_says_and_the_connection_closes(
    raw_proxy, raw_origin, answer, body
):
    """Chunked (rewritten plainly, trailers dropped, no Content-Length), no body, and an
    interim answer before the final one: the browser gets the body, then the end."""
    raw_origin.answer = answer
    reader, writer = await asyncio.open_connection("127.0.0.1", raw_proxy.port)
    try:
        async with asyncio.timeout(DEADLINE_S):
            writer.write(get(f"http://127.0.0.1:{raw_origin.port}/"))
            received = await reader.read()
    finally:
        writer.close()
    assert received.startswith(b"HTTP/1.1 ")
    assert received.endswith(b"Connection: close\r\n\r\n" + body)
    assert b"content-length: 99" not in received.lower()


@pytest.mark.parametrize(
    "answer",
    [
        b"",
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
    ],
)
async def test_an_answer_that_cannot_be_passed_on_is_a_502_connection(
    raw_proxy, raw_origin, answer
):
    raw_origin.answer = answer
    reader, writer = await asyncio.open_connection("127.0.0.1", raw_proxy.port)
    try:
        async with asyncio.timeout(DEADLINE_S):
            writer.write(get(f"http://127.0.0.1:{raw_origin.port}/"))
            if not answer:
                await _wait_for(lambda: raw_origin.heads, "the origin got the request")
                writer.write_eof()  # the origin closes: the proxy sees an empty answer
            received = await reader.read()
    finally:
        writer.close()
    assert received.startswith(b"HTTP/1.1 502 ")
    assert b"X-Crawlstream-Error: connection" in received


async def test_a_chunked_request_body_is_refused_before_connecting(raw_proxy, raw_origin):
    request = get(f"http://127.0.0.1:{raw_origin.port}/", "Transfer-Encoding: chunked")
    reply, _ = await exchange(raw_proxy.port, request + b"0\r\n\r\n")
    assert reply.status == 400
    assert raw_origin.heads == []


@pytest.fixture
async def hanging_proxy(raw_origin, origins):
    """A proxy in front of `raw_origin`, which never answers (hanging fetches), and of the
    allowed echo origin; at most 4 connections, 2 per context."""
    allowed, _ = origins
    policy = UrlPolicy.create(
        allowed_hosts=[f"127.0.0.1:{raw_origin.port}", f"127.0.0.1:{allowed.port}"]
    )
    async with EgressProxy(
        policy, credential=CREDENTIAL, max_connections=4, per_context=2
    ) as running:
        yield running


async def _hanging(proxy: EgressProxy, origin: RawOrigin, credential: ProxyCredential):
    """A request with `credential` that the origin has received and never answers."""
    received = len(origin.heads)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    auth = f"Proxy-Authorization: {credential.header_value}"
    writer.write(get(f"http://127.0.0.1:{origin.port}/hang", auth=auth))
    await _wait_for(lambda: len(origin.heads) > received, "the origin got the request")
    return reader, writer


async def test_a_context_past_its_limit_loses_its_own_oldest_connection(hanging_proxy, raw_origin):
    """Context A holds its 2 connections with hanging requests; its third closes A's least
    recently active one, and context B's connection is untouched."""
    greedy, other = hanging_proxy.access.for_context(), hanging_proxy.access.for_context()
    first = await _hanging(hanging_proxy, raw_origin, greedy)
    second = await _hanging(hanging_proxy, raw_origin, greedy)
    bystander = await _hanging(hanging_proxy, raw_origin, other)
    third = await _hanging(hanging_proxy, raw_origin, greedy)
    assert await _closed_by_peer(first[0])
    assert hanging_proxy.held_by(greedy.username) == 2
    assert hanging_proxy.held_by(other.username) == 1
    assert hanging_proxy.evicted_total == 1
    for _, writer in (first, second, bystander, third):
        writer.close()


async def test_a_full_proxy_makes_room_for_another_context_by_evicting_the_greediest(
    hanging_proxy, raw_origin, origins
):
    """4 connections held (A 2, B 1, C 1): D's request is served, and it is A (more than its
    share) that loses its least recently active connection, not the others."""
    allowed, _ = origins
    access = hanging_proxy.access
    greedy = access.for_context()
    held = [await _hanging(hanging_proxy, raw_origin, greedy) for _ in range(2)]
    held += [await _hanging(hanging_proxy, raw_origin, access.for_context()) for _ in range(2)]
    newcomer = access.for_context()
    auth = f"Proxy-Authorization: {newcomer.header_value}"
    reply, _ = await exchange(
        hanging_proxy.port, get(f"http://127.0.0.1:{allowed.port}/served", auth=auth)
    )
    assert (reply.status, reply.body) == (200, b"GET /served 0")
    assert await _closed_by_peer(held[0][0])
    assert hanging_proxy.refused_total == 0
    assert hanging_proxy.held_by(greedy.username) == 1
    for _, writer in held:
        writer.close()


async def test_the_login_address_is_answered_by_the_proxy_only_with_a_credential(
    proxy, blocked_log
):
    """A plain request for the proxy's own login address gets 200 from the proxy itself
    with a credential (no policy verdict, no connection), and the 407 challenge without."""
    login = proxy.access.login_url
    reply, _ = await exchange(proxy.port, get(login))
    assert reply.status == 200
    assert b"Logged in" in reply.body
    challenged, _ = await exchange(proxy.port, get(login, auth="X-None: 1"))
    assert challenged.status == 407
    assert blocked_log == []
    other, _ = await exchange(proxy.port, get(f"{proxy.url}/elsewhere"))
    assert other.status == 403
