"""A small upstream HTTP proxy for tests: CONNECT only, Basic credentials required, and a
record of every tunnel (its target and the first request line sent through it)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@dataclass(slots=True)
class UpstreamProxy:
    """A running test proxy on `host`:`port` that admits `username`:`password`."""

    host: str
    username: str
    password: str
    port: int = 0
    tunnels: list[tuple[str, str]] = field(default_factory=list)
    """(CONNECT target, first request line through it) of every tunnel opened."""
    rejected: int = 0
    """CONNECTs answered 407."""

    def url(self, password: str | None = None) -> str:
        return f"http://{self.username}:{password or self.password}@{self.host}:{self.port}"

    def paths(self) -> list[str]:
        """The request targets (paths) sent through the tunnels."""
        return [line.split(" ")[1] for _, line in self.tunnels if line.count(" ") >= 2]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *lines = head.split("\r\n")
            method, target, _ = request_line.split(" ", 2)
            pair = f"{self.username}:{self.password}".encode()
            expected = f"Basic {base64.b64encode(pair).decode()}"
            offered = [
                v.strip()
                for n, _, v in (x.partition(":") for x in lines)
                if n.strip().lower() == "proxy-authorization"
            ]
            if method != "CONNECT" or expected not in offered:
                self.rejected += 1
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                await writer.drain()
                return
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            first = await reader.readuntil(b"\r\n")
            self.tunnels.append((target, first.decode("latin-1").strip()))
            up_writer.write(first)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()


@asynccontextmanager
async def upstream_proxy(host: str, username: str, password: str) -> AsyncIterator[UpstreamProxy]:
    proxy = UpstreamProxy(host=host, username=username, password=password)
    server = await asyncio.start_server(proxy.serve, host, 0)
    proxy.port = server.sockets[0].getsockname()[1]
    try:
        yield proxy
    finally:
        server.close()
