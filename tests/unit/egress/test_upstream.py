"""Chaining to an upstream proxy: the SOCKS5 client (RFC 1928/1929) and http CONNECT against
small in-process servers; what a proxy's failure says; what a proxy's repr hides."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from service.egress.upstream import UpstreamError, UpstreamPools, UpstreamProxy, connect_via
from service.net.policy import UrlPolicy

SECRET = "pa55-word"  # noqa: S105 (the test server's)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"echo:" + await reader.readexactly(4))
    await writer.drain()
    writer.close()


async def _socks(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A SOCKS5 server that wants user `u` with SECRET and connects by domain name."""
    _, count = await reader.readexactly(2)
    await reader.readexactly(count)
    writer.write(b"\x05\x02")
    _, ulen = await reader.readexactly(2)
    user = await reader.readexactly(ulen)
    plen = (await reader.readexactly(1))[0]
    password = await reader.readexactly(plen)
    ok = user == b"u" and password == SECRET.encode()
    writer.write(b"\x01\x00" if ok else b"\x01\x01")
    if not ok:
        writer.close()
        return
    _, _, _, kind = await reader.readexactly(4)
    assert kind == 3
    name = await reader.readexactly((await reader.readexactly(1))[0])
    port = int.from_bytes(await reader.readexactly(2), "big")
    target_reader, target_writer = await asyncio.open_connection(name.decode(), port)
    writer.write(b"\x05\x00\x00\x01" + bytes(4) + b"\x00\x00")
    target_writer.write(await reader.readexactly(4))
    writer.write(await target_reader.read(64))
    await writer.drain()
    target_writer.close()
    await target_writer.wait_closed()
    writer.close()


@contextlib.asynccontextmanager
async def _serving(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_a_socks5_proxy_with_credentials_tunnels_to_the_target_by_name() -> None:
    async with _serving(_echo) as target, _serving(_socks) as socks:
        proxy = UpstreamProxy.parse(f"socks5://u:{SECRET}@127.0.0.1:{socks}", pool="p")
        stream = await connect_via(proxy, "localhost", target, UrlPolicy.create(), 5.0)
        stream.writer.write(b"ping")
        assert await stream.reader.read(64) == b"echo:ping"
        stream.writer.close()
        await stream.writer.wait_closed()


async def test_a_socks5_proxy_that_rejects_the_password_is_an_upstream_error() -> None:
    async with _serving(_socks) as socks:
        proxy = UpstreamProxy.parse(f"socks5://u:wrong@127.0.0.1:{socks}", pool="office")
        with pytest.raises(UpstreamError, match=r"proxy office rejected its credentials") as err:
            await connect_via(proxy, "localhost", 80, UrlPolicy.create(), 5.0)
        assert "wrong" not in str(err.value)


async def test_an_http_proxy_answering_407_or_refusing_is_an_upstream_error() -> None:
    async def answer_407(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
        await writer.drain()
        writer.close()

    async with _serving(answer_407) as port:
        proxy = UpstreamProxy.parse(f"http://u:{SECRET}@127.0.0.1:{port}", pool="office")
        with pytest.raises(UpstreamError, match=r"\(407\)"):
            await connect_via(proxy, "example.com", 443, UrlPolicy.create(), 5.0)
    closed = UpstreamProxy.parse("http://127.0.0.1:9", pool="office")
    with pytest.raises(UpstreamError, match="connection failed"):
        await connect_via(closed, "example.com", 443, UrlPolicy.create(), 5.0)


async def test_a_named_proxy_at_a_private_address_is_refused_by_the_policy() -> None:
    """A proxy a request names is a target too: loopback is not reachable by default."""
    proxy = UpstreamProxy.parse("http://127.0.0.1:3128")
    with pytest.raises(UpstreamError, match=r"proxy 127\.0\.0\.1:3128: "):
        await connect_via(proxy, "example.com", 443, UrlPolicy.create(), 5.0)


def test_credentials_stay_out_of_reprs_and_pools_rotate() -> None:
    proxy = UpstreamProxy.parse(f"http://u:{SECRET}@proxy.test:3128")
    assert SECRET not in repr(proxy)
    assert proxy.label == "proxy.test:3128"
    pools = UpstreamPools({"office": ["http://a.test:1", "socks5://b.test"]})
    assert [pools.choose("office").host for _ in range(3)] == ["a.test", "b.test", "a.test"]
    assert pools.choose("office").label == "office"
    with pytest.raises(ValueError, match="proxy is an http"):
        UpstreamProxy.parse(f"ftp://u:{SECRET}@x.test")
