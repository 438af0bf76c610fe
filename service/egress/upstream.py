"""Upstream proxies the egress proxy chains to (`CrawlOptions.proxy`, `CRAWL_PROXIES`).

A request names a proxy URL (`http://`, `https://` or `socks5://`, credentials optional) or a
pool of `CRAWL_PROXIES`. The egress proxy still checks every target against the URL policy
first; then, instead of connecting to the target, it opens a tunnel to it through the
upstream: `CONNECT host:port` to an http(s) proxy (TLS to the proxy itself for `https://`),
or a SOCKS5 CONNECT (RFC 1928, user and password by RFC 1929). Plain http goes through that
tunnel too, as it would to the origin. A pool rotates its proxies, one per connection.

A proxy a request names is a target like any other: its address must pass the URL policy
(public, on an egress port, or allow-listed). The pools are the operator's and are trusted.
Credentials never leave this module: logs and messages name a pool, or a proxy's host:port.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import itertools
import ssl
import struct
from typing import TYPE_CHECKING, Final

from service.egress.tunnel import STREAM_LIMIT, Stream
from service.errors import RetryableError
from service.net.policy import BlockedUrlError, UnresolvableHostError
from service.proxy_url import UpstreamProxy, is_proxy_url

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from service.net.policy import UrlPolicy

MAX_ANSWER_BYTES: Final = 16 * 1024
"""Largest answer head to a CONNECT read from an upstream proxy."""

PROXY_AUTH_REQUIRED: Final = 407

_SOCKS_VERSION: Final = 5
_SOCKS_USER_PASSWORD: Final = 2
_SOCKS_NO_AUTH: Final = 0
_SOCKS_REPLIES: Final = {
    1: "general failure",
    2: "connection not allowed by ruleset",
    3: "network unreachable",
    4: "host unreachable",
    5: "connection refused",
    6: "TTL expired",
    7: "command not supported",
    8: "address type not supported",
}


class UpstreamError(RetryableError):
    """An upstream proxy refused, rejected its credentials or failed (`proxy_error`); the
    message names the proxy by its label only."""


class UpstreamPools:
    """The pools of `CRAWL_PROXIES`, each rotated one proxy per connection."""

    def __init__(self, pools: Mapping[str, Sequence[str]]) -> None:
        self._pools = {
            name: [UpstreamProxy.parse(url, pool=name) for url in urls]
            for name, urls in pools.items()
        }
        self._turns: dict[str, Iterator[UpstreamProxy]] = {
            name: itertools.cycle(proxies) for name, proxies in self._pools.items() if proxies
        }

    def choose(self, spec: str) -> UpstreamProxy:
        """The proxy for the next connection of a request whose `proxy` is `spec`."""
        if is_proxy_url(spec):
            return UpstreamProxy.parse(spec)
        turn = self._turns.get(spec)
        if turn is None:
            raise UpstreamError(f"proxy pool {spec!r} is not in CRAWL_PROXIES or is empty")
        return next(turn)


async def connect_via(
    proxy: UpstreamProxy, host: str, port: int, policy: UrlPolicy, deadline_s: float
) -> Stream:
    """A tunnel to `host:port` through `proxy`, within `deadline_s`; `UpstreamError` when
    the proxy cannot be reached, refuses or rejects its credentials."""
    try:
        async with asyncio.timeout(deadline_s):
            stream = await _open(proxy, policy)
            try:
                if proxy.scheme == "socks5":
                    await _socks5_connect(stream, proxy, host, port)
                else:
                    await _http_connect(stream, proxy, host, port)
            except BaseException:
                stream.abort()
                raise
            return stream
    except TimeoutError:
        raise UpstreamError(f"proxy {proxy.label} did not answer in time") from None
    except (BlockedUrlError, UnresolvableHostError) as exc:
        raise UpstreamError(f"proxy {proxy.label}: {exc.reason}") from None
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        reason = type(exc).__name__
        raise UpstreamError(f"proxy {proxy.label}: connection failed ({reason})") from None


async def _open(proxy: UpstreamProxy, policy: UrlPolicy) -> Stream:
    if proxy.trusted:
        addresses: list[str] = [proxy.host]
    else:
        addresses = [str(a) for a in await policy.resolve_and_check(proxy.host, proxy.port)]
    tls = ssl.create_default_context() if proxy.scheme == "https" else None
    last: OSError = OSError("no address")
    for address in addresses:
        try:
            reader, writer = await asyncio.open_connection(
                address,
                proxy.port,
                ssl=tls,
                server_hostname=proxy.host if tls is not None else None,
                limit=STREAM_LIMIT,
            )
        except OSError as exc:
            last = exc
        else:
            return Stream(reader=reader, writer=writer)
    raise last


def _authority(host: str, port: int) -> str:
    try:
        return f"[{host}]:{port}" if ipaddress.ip_address(host).version == 6 else f"{host}:{port}"  # noqa: PLR2004
    except ValueError:
        return f"{host}:{port}"


async def _http_connect(stream: Stream, proxy: UpstreamProxy, host: str, port: int) -> None:
    authority = _authority(host, port)
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.username is not None:
        pair = f"{proxy.username}:{proxy.password or ''}".encode()
        lines.append(f"Proxy-Authorization: Basic {base64.b64encode(pair).decode('ascii')}")
    stream.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    await stream.writer.drain()
    head = await stream.reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_ANSWER_BYTES:
        raise UpstreamError(f"proxy {proxy.label}: answer head too large")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    fields = status_line.split(" ", 2)
    status = int(fields[1]) if len(fields) > 1 and fields[1].isdecimal() else 0
    if status == PROXY_AUTH_REQUIRED:
        raise UpstreamError(f"proxy {proxy.label} rejected its credentials (407)")
    if not 200 <= status < 300:  # noqa: PLR2004
        raise UpstreamError(f"proxy {proxy.label} refused the tunnel ({status or status_line!r})")


async def _socks5_connect(stream: Stream, proxy: UpstreamProxy, host: str, port: int) -> None:
    """RFC 1928 CONNECT by domain name (or address), with RFC 1929 user/password if given."""
    methods = [_SOCKS_USER_PASSWORD] if proxy.username is not None else [_SOCKS_NO_AUTH]
    stream.writer.write(bytes([_SOCKS_VERSION, len(methods), *methods]))
    version, method = await stream.reader.readexactly(2)
    if version != _SOCKS_VERSION or method not in methods:
        raise UpstreamError(f"proxy {proxy.label} accepts none of the offered SOCKS methods")
    if method == _SOCKS_USER_PASSWORD:
        user = (proxy.username or "").encode()[:255]
        password = (proxy.password or "").encode()[:255]
        stream.writer.write(bytes([1, len(user)]) + user + bytes([len(password)]) + password)
        _, status = await stream.reader.readexactly(2)
        if status != 0:
            raise UpstreamError(f"proxy {proxy.label} rejected its credentials (SOCKS5)")
    stream.writer.write(
        bytes([_SOCKS_VERSION, 1, 0]) + _socks_address(host) + struct.pack("!H", port)
    )
    _, reply, _, kind = await stream.reader.readexactly(4)
    if reply != 0:
        why = _SOCKS_REPLIES.get(reply, f"reply {reply}")
        raise UpstreamError(f"proxy {proxy.label} refused the connection ({why})")
    length = {1: 4, 4: 16}.get(kind) or (await stream.reader.readexactly(1))[0]
    await stream.reader.readexactly(length + 2)  # the bound address and port


def _socks_address(host: str) -> bytes:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = host.encode("idna")[:255]
        return bytes([3, len(name)]) + name
    return bytes([1 if address.version == 4 else 4]) + address.packed  # noqa: PLR2004
