"""Connecting to a checked address and moving bytes both ways until the origin is done."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from service.crawling._ip_ranges import IPAddress

CHUNK_BYTES: Final = 64 * 1024
"""Largest read from one side before it is written to the other."""

STREAM_LIMIT: Final = 64 * 1024
"""Buffer limit of the upstream stream reader."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stream:
    """Both halves of one TCP connection."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def abort(self) -> None:
        self.writer.transport.abort()


async def open_upstream(addresses: Sequence[IPAddress], port: int, deadline_s: float) -> Stream:
    """A connection to the first of `addresses` that accepts, all within `deadline_s`.

    Raises TimeoutError past the deadline and the last OSError when every address refused.
    """
    last_error: OSError = OSError(f"no address to connect to on port {port}")
    async with asyncio.timeout(deadline_s):
        for address in addresses:
            try:
                reader, writer = await asyncio.open_connection(
                    str(address), port, limit=STREAM_LIMIT
                )
            except OSError as exc:
                last_error = exc
            else:
                return Stream(reader=reader, writer=writer)
    raise last_error


@dataclass(slots=True, kw_only=True)
class Tunnel:
    """Relays between a client and an origin until the origin closes, or both sides have been
    silent for `idle_s`. A client that half-closes still gets the rest of the response."""

    client: Stream
    upstream: Stream
    idle_s: float
    _last_activity: float = field(default_factory=lambda: asyncio.get_running_loop().time())

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            upload = group.create_task(self._relay(self.client, self.upstream))
            await self._relay(self.upstream, self.client)
            upload.cancel()

    async def _relay(self, source: Stream, sink: Stream) -> None:
        try:
            while data := await self._read(source):
                sink.writer.write(data)
                async with asyncio.timeout(self.idle_s):
                    await sink.writer.drain()
            if sink.writer.can_write_eof():
                sink.writer.write_eof()
        except (OSError, TimeoutError):
            self.client.abort()
            self.upstream.abort()

    async def _read(self, source: Stream) -> bytes:
        """The next chunk; b"" at end of stream. TimeoutError once both ways were idle."""
        loop = asyncio.get_running_loop()
        while True:
            left = self._last_activity + self.idle_s - loop.time()
            if left <= 0:
                raise TimeoutError
            try:
                async with asyncio.timeout(left):
                    data = await source.reader.read(CHUNK_BYTES)
            except TimeoutError:
                continue
            self._last_activity = loop.time()
            return data
