"""A bare TCP listener that counts every connection, to prove nothing reaches it."""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from yarl import URL

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

READ_DEADLINE_SECONDS = 2.0
"""How long a connection may take to send its request head."""

HEAD_END = b"\r\n\r\n"
"""End of an HTTP request head."""

REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nhit"
"""What every HTTP request receives."""

QUIET_ENDINGS = (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError)
"""How a connection may end without a proper request; the hit is counted anyway."""


@dataclass(slots=True)
class _Tally:
    connections: int = 0
    open_writers: set[asyncio.StreamWriter] = field(default_factory=set)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._track(writer)
        try:
            with contextlib.suppress(*QUIET_ENDINGS):
                async with asyncio.timeout(READ_DEADLINE_SECONDS):
                    await reader.readuntil(HEAD_END)
                    writer.write(REPLY)
                    await writer.drain()
        finally:
            writer.close()
            self.open_writers.discard(writer)

    def _track(self, writer: asyncio.StreamWriter) -> None:
        self.open_writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def stop(self) -> None:
        """Hang up on open connections, then wait for their handlers to see it.

        Closing rather than cancelling: on Python 3.11 a cancelled stream handler task
        makes asyncio log an error.
        """
        for writer in self.open_writers:
            writer.close()
        await asyncio.gather(*self.tasks)


@dataclass(frozen=True, slots=True, kw_only=True)
class HitCounter:
    """A running counter: `url` to aim at, `hits` connections received so far."""

    url: str
    port: int
    _tally: _Tally

    @property
    def hits(self) -> int:
        return self._tally.connections


@asynccontextmanager
async def hit_counter(host: str = "127.0.0.1") -> AsyncIterator[HitCounter]:
    """Listen on a free port of `host` and count whatever connects, HTTP or not."""
    tally = _Tally()
    server = await asyncio.start_server(tally.serve_one, host, 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield HitCounter(
            url=str(URL.build(scheme="http", host=host, port=port)), port=port, _tally=tally
        )
    finally:
        server.close()
        await tally.stop()
        await server.wait_closed()
