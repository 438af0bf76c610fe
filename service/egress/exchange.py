"""One plain-http request through the egress proxy: one request per browser connection.

The request head (already rewritten for the origin) and exactly its `Content-Length` of body
go up; nothing more the browser sends on the connection is forwarded. The answer comes back
with its head rewritten (`response`), its body relayed as framed, and then both
connections close, whatever the site does with its own. A protocol switch (101) the browser
asked for becomes a tunnel.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from service.egress.head import wants_upgrade
from service.egress.response import (
    BadResponseError,
    BodyFraming,
    Framing,
    ResponseHead,
    browser_head,
    chunk_size,
    framing,
    parse_response_head,
)
from service.egress.tunnel import CHUNK_BYTES, Activity, Tunnel

if TYPE_CHECKING:
    from service.egress.head import RequestHead
    from service.egress.tunnel import Stream

MAX_RESPONSE_HEAD_BYTES: Final = 64 * 1024
"""Largest answer head (status line and headers) read from a site."""

MAX_INTERIM_ANSWERS: Final = 16
"""1xx answers passed on before the final one; a site sending more gets a 502."""

MAX_LINE_BYTES: Final = 8 * 1024
"""Longest chunk-size or trailer line of a chunked body."""


@dataclass(slots=True, kw_only=True)
class Exchange:
    """Relays one request (`head`, sent up as `origin_head`, then `body_length` bytes) and
    its answer. Raises BadResponseError when the site's answer cannot be passed on before
    anything of it reached the browser (the proxy answers 502 then)."""

    client: Stream
    upstream: Stream
    head: RequestHead
    origin_head: bytes
    body_length: int
    idle_s: float
    activity: Activity = field(default_factory=Activity)
    answered: bool = False
    """Whether any byte of the answer was passed on to the browser."""

    async def run(self) -> None:
        upgrade = wants_upgrade(self.head)
        upload = asyncio.create_task(self._upload(watch=not upgrade))
        try:
            final = await self._final_head()
            if final.switching:
                await self._switch(final, upload, upgrade=upgrade)
                return
            body = framing(final, method=self.head.method)
            await self._send(browser_head(final))
            await self._relay_body(body)
        except (OSError, TimeoutError):
            self._abort()
        except BadResponseError:
            self.upstream.abort()
            if not self.answered:
                raise
            self.client.abort()
        finally:
            upload.cancel()
            await asyncio.gather(upload, return_exceptions=True)

    async def _switch(
        self, final: ResponseHead, upload: asyncio.Task[None], *, upgrade: bool
    ) -> None:
        """The site switched protocols: a tunnel from now on, if the browser asked for it."""
        if not upgrade:
            raise BadResponseError("101 Switching Protocols to a request that did not ask")
        await upload  # the request had no body to wait for: it is done
        await self._send(browser_head(final, upgrade=True))
        await Tunnel(
            client=self.client, upstream=self.upstream, idle_s=self.idle_s, activity=self.activity
        ).run()

    def _abort(self) -> None:
        self.client.abort()
        self.upstream.abort()

    async def _upload(self, *, watch: bool) -> None:
        """The request and its body; then, with `watch`, keep reading the browser so that
        its end is seen (it is passed on as an end of the request) and nothing it sends is
        forwarded. A browser gone mid-body ends the exchange."""
        try:
            self.upstream.writer.write(self.origin_head)
            await self._upload_body()
            if watch:
                while await self.client.reader.read(CHUNK_BYTES):
                    pass  # a request after the first on this connection: never forwarded
                if self.upstream.writer.can_write_eof():
                    self.upstream.writer.write_eof()
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            self._abort()

    async def _upload_body(self) -> None:
        left = self.body_length
        while left > 0:
            step = functools.partial(self.client.reader.read, min(left, CHUNK_BYTES))
            data = await self.activity.within(self.idle_s, step)
            if not data:
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(data)
            self.upstream.writer.write(data)
            await self._drain(self.upstream)
        await self._drain(self.upstream)

    async def _final_head(self) -> ResponseHead:
        """The site's final answer head; interim (1xx) answers are passed on before it."""
        for _ in range(MAX_INTERIM_ANSWERS):
            head = parse_response_head(await self._head_lines())
            if not head.interim:
                return head
            await self._send(browser_head(head))
        raise BadResponseError(f"more than {MAX_INTERIM_ANSWERS} interim answers")

    async def _head_lines(self) -> list[bytes]:
        lines: list[bytes] = []
        size = 0
        while True:
            line = await self._line(MAX_RESPONSE_HEAD_BYTES - size)
            size += len(line)
            text = line.rstrip(b"\r\n")
            if not text and lines:
                return lines
            if text:  # blank lines before a status line are skipped, as browsers do
                lines.append(text)

    async def _line(self, limit: int) -> bytes:
        """One line of the answer, with its line end; BadResponseError past `limit` bytes."""
        try:
            step = functools.partial(self.upstream.reader.readuntil, b"\n")
            line = await self.activity.within(self.idle_s, step)
        except asyncio.LimitOverrunError:
            raise BadResponseError("an answer line is too long") from None
        except asyncio.IncompleteReadError as exc:
            raise BadResponseError("the site closed the connection mid-answer") from exc
        if len(line) > limit:
            raise BadResponseError("the answer head is too large")
        return line

    async def _relay_body(self, body: BodyFraming) -> None:
        if body.kind is Framing.LENGTH:
            await self._relay_exactly(body.length)
        elif body.kind is Framing.CHUNKED:
            await self._relay_chunks()
        elif body.kind is Framing.CLOSE:
            while data := await self._read(CHUNK_BYTES):
                await self._send(data)

    async def _relay_chunks(self) -> None:
        """A chunked body, chunk by chunk, rewritten plainly (size lines without extensions,
        no trailers) so the browser reads the same chunks."""
        while size := chunk_size((await self._line(MAX_LINE_BYTES)).rstrip(b"\r\n")):
            await self._send(f"{size:x}\r\n".encode("ascii"))
            await self._relay_exactly(size)
            if (await self._line(MAX_LINE_BYTES)).rstrip(b"\r\n"):
                raise BadResponseError("a chunk is longer than its size")
            await self._send(b"\r\n")
        while (await self._line(MAX_LINE_BYTES)).rstrip(b"\r\n"):
            pass  # trailer fields: not passed on
        await self._send(b"0\r\n\r\n")

    async def _relay_exactly(self, length: int) -> None:
        left = length
        while left > 0:
            data = await self._read(min(left, CHUNK_BYTES))
            if not data:
                raise BadResponseError("the site closed the connection mid-body")
            left -= len(data)
            await self._send(data)

    async def _read(self, size: int) -> bytes:
        step = functools.partial(self.upstream.reader.read, size)
        return await self.activity.within(self.idle_s, step)

    async def _send(self, data: bytes) -> None:
        self.answered = True
        self.client.writer.write(data)
        await self._drain(self.client)

    async def _drain(self, stream: Stream) -> None:
        async with asyncio.timeout(self.idle_s):
            await stream.writer.drain()
