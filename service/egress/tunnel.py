"""Connecting to a checked address and moving bytes both ways until the origin is done."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from service.net.ip_ranges import IPAddress

CHUNK_BYTES: Final = 64 * 1024
"""Largest read from one side before it is written to the other."""

STREAM_LIMIT: Final = 64 * 1024
"""Buffer limit of the upstream stream reader."""

T = TypeVar("T")


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


@dataclass(slots=True)
class Activity:
    """When a connection last moved a byte, in loop time; shared by both directions."""

    last: float = field(default_factory=lambda: asyncio.get_running_loop().time())

    def touch(self) -> None:
        self.last = asyncio.get_running_loop().time()

    async def within(self, idle_s: float, step: Callable[[], Awaitable[T]]) -> T:
        """`await step()` (made again after each wait) once the connection moves a byte;
        TimeoutError once it moved none in either direction for `idle_s`."""
        loop = asyncio.get_running_loop()
        while True:
            left = self.last + idle_s - loop.time()
            if left <= 0:
                raise TimeoutError
            try:
                async with asyncio.timeout(left):
                    result = await step()
            except TimeoutError:
                continue
            self.touch()
            return result


@dataclass(slots=True, kw_only=True)
class Tunnel:
    """Relays between a client and an origin until the origin closes, or both sides have been
    silent for `idle_s`. A client that half-closes still gets the rest of the response."""

    client: Stream
    upstream: Stream
    idle_s: float
    activity: Activity = field(default_factory=Activity)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            upload = group.create_task(self._relay(self.client, self.upstream))
            await self._relay(self.upstream, self.client)
            upload.cancel()

    async def _relay(self, source: Stream, sink: Stream) -> None:
        try:
            read = functools.partial(source.reader.read, CHUNK_BYTES)
            while data := await self.activity.within(self.idle_s, read):
                sink.writer.write(data)
                async with asyncio.timeout(self.idle_s):
                    await sink.writer.drain()
            if sink.writer.can_write_eof():
                sink.writer.write_eof()
        except (OSError, TimeoutError):
            self.client.abort()
            self.upstream.abort()
