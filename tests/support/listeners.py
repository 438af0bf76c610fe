"""Listeners that count every packet sent to them, to prove that none arrives.

`listening(host)` binds a TCP listener and a UDP socket on one port of `host` and counts TCP
connections and UDP datagrams. `mdns_queries(word)` counts multicast DNS packets (to
224.0.0.251:5353) that name `word`. `local_ipv4_addresses()` lists the machine's own
addresses that are not loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import struct
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

SIOCGIFADDR = 0x8915
"""Linux ioctl: the IPv4 address of a network interface."""

MDNS_GROUP = "224.0.0.251"
MDNS_PORT = 5353

BIND_ATTEMPTS = 20
"""Ports tried before giving up on finding one free for both TCP and UDP."""


@dataclass(slots=True)
class Counts:
    """What one listener received."""

    tcp_connections: int = 0
    udp_datagrams: int = 0
    senders: list[tuple[str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.tcp_connections + self.udp_datagrams


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, counts: Counts) -> None:
        self.counts = counts

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:  # noqa: ARG002
        self.counts.udp_datagrams += 1
        self.counts.senders.append(addr[:2])


@dataclass(frozen=True, slots=True, kw_only=True)
class Listener:
    """A TCP listener and a UDP socket on `host`:`port`."""

    host: str
    port: int
    counts: Counts

    @property
    def target(self) -> str:
        """`host:port`, with brackets around an IPv6 host."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@asynccontextmanager
async def listening(host: str) -> AsyncIterator[Listener]:
    """Count TCP connections and UDP datagrams on one free port of `host`."""
    counts = Counts()
    loop = asyncio.get_running_loop()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts.tcp_connections += 1
        counts.senders.append(writer.get_extra_info("peername")[:2])
        writer.close()

    for _ in range(BIND_ATTEMPTS):
        server = await asyncio.start_server(accepted, host, 0)
        port = server.sockets[0].getsockname()[1]
        try:
            udp, _ = await loop.create_datagram_endpoint(
                lambda: _Datagrams(counts), local_addr=(host, port)
            )
        except OSError:
            server.close()
            await server.wait_closed()
            continue
        break
    else:
        raise OSError(f"no port of {host} is free for both TCP and UDP")
    try:
        yield Listener(host=host, port=port, counts=counts)
    finally:
        udp.close()
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def mdns_queries(word: str, interface: str) -> AsyncIterator[Counts]:
    """Count multicast DNS packets that carry `word`, as seen on the interface of the local
    address `interface` (multicast sent by this machine loops back to its own listeners)."""
    counts = Counts()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("", MDNS_PORT))
    membership = socket.inet_aton(MDNS_GROUP) + socket.inet_aton(interface)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
    sock.setblocking(False)  # noqa: FBT003
    needle = word.encode()

    def readable() -> None:
        with contextlib.suppress(BlockingIOError):
            data, sender = sock.recvfrom(9000)
            if needle in data:
                counts.udp_datagrams += 1
                counts.senders.append(sender[:2])

    loop = asyncio.get_running_loop()
    loop.add_reader(sock.fileno(), readable)
    try:
        yield counts
    finally:
        loop.remove_reader(sock.fileno())
        sock.close()


def local_ipv4_addresses() -> list[str]:
    """IPv4 addresses of this machine's interfaces, loopback excluded."""
    found = []
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                request = struct.pack("256s", name.encode()[:15])
                reply = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)
            except OSError:
                continue  # no IPv4 address on this interface
        address = socket.inet_ntoa(reply[20:24])
        if not address.startswith("127."):
            found.append(address)
    return found


def ipv6_loopback_available() -> bool:
    """Whether `::1` can be bound here."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True
