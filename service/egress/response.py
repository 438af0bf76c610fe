"""A site's answer to a plain-http request, as the egress proxy passes it on to the browser.

Parsed leniently (as a browser reads it: LF line ends, folded lines, stray lines dropped) and
written again strictly, so the browser reads exactly what this parser understood:

- the proxy's own verdict headers (`X-Crawlstream-*`) are dropped, so a site cannot pass
  its page off as the proxy's refusal;
- hop-by-hop headers are dropped and `Connection: close` is added: one request per browser
  connection, so every request is parsed and authenticated by the proxy (a site that ignores
  `Connection: close` cannot receive the browser's next request, nor its proxy credential);
- the body's framing (`Content-Length`, chunked, or to the end of the connection) tells the
  proxy when the answer is over, so it closes both sides then.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from service.egress.head import is_token

VERDICT_PREFIX: Final = "x-crawlstream-"
"""Headers with this prefix are the proxy's own; a site's are dropped."""

_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade"}
)
"""Headers about one connection, never passed on (an upgrade's `Upgrade` is kept)."""

_NO_BODY_STATUSES: Final = frozenset({204, 304})
_INTERIM_FROM: Final = 100
_INTERIM_TO: Final = 199
SWITCHING_PROTOCOLS: Final = 101
_STATUS_LINE_MIN_PARTS: Final = 2


class BadResponseError(ValueError):
    """The site's answer is not HTTP/1.x the proxy can pass on; the browser gets a 502."""


class Framing(Enum):
    """Where the body of an answer ends."""

    NONE = "none"
    LENGTH = "length"
    CHUNKED = "chunked"
    CLOSE = "close"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseHead:
    """The status line and headers of a site's answer."""

    version: str
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]

    @property
    def interim(self) -> bool:
        """A 1xx answer before the final one (100 Continue, 103 Early Hints; not 101)."""
        return _INTERIM_FROM <= self.status <= _INTERIM_TO and not self.switching

    @property
    def switching(self) -> bool:
        return self.status == SWITCHING_PROTOCOLS

    def values(self, name: str) -> list[str]:
        """The values of header `name` (case-insensitive), split at commas."""
        wanted = name.lower()
        return [
            part.strip()
            for key, value in self.headers
            if key.lower() == wanted
            for part in value.split(",")
            if part.strip()
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class BodyFraming:
    """How the body of an answer is delimited: `length` bytes for `Framing.LENGTH`."""

    kind: Framing
    length: int = 0


def parse_response_head(lines: list[bytes]) -> ResponseHead:
    """The head from its lines (each without its line end, the empty last line left out)."""
    if not lines:
        raise BadResponseError("an empty answer")
    status_line = lines[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < _STATUS_LINE_MIN_PARTS or parts[0] not in {"HTTP/1.0", "HTTP/1.1"}:
        raise BadResponseError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
    code = parts[1]
    if not (code.isascii() and code.isdecimal() and len(code) == 3):  # noqa: PLR2004
        raise BadResponseError(f"invalid status {code[:10]!r}")
    return ResponseHead(
        version=parts[0],
        status=int(code),
        reason=parts[2] if len(parts) > _STATUS_LINE_MIN_PARTS else "",
        headers=_headers(lines[1:]),
    )


def framing(head: ResponseHead, *, method: str) -> BodyFraming:
    """Where the body of the final answer `head` to a `method` request ends."""
    if method == "HEAD" or head.status in _NO_BODY_STATUSES or head.interim:
        return BodyFraming(kind=Framing.NONE)
    codings = head.values("transfer-encoding")
    if codings:
        chunked = codings[-1].lower() == "chunked"
        return BodyFraming(kind=Framing.CHUNKED if chunked else Framing.CLOSE)
    lengths = set(head.values("content-length"))
    if not lengths:
        return BodyFraming(kind=Framing.CLOSE)
    if len(lengths) > 1:
        raise BadResponseError("conflicting Content-Length values")
    [length] = lengths
    if not (length.isascii() and length.isdecimal()):
        raise BadResponseError(f"invalid Content-Length {length[:20]!r}")
    return BodyFraming(kind=Framing.LENGTH, length=int(length))


def browser_head(head: ResponseHead, *, upgrade: bool = False) -> bytes:
    """The head the browser gets: no verdict or hop-by-hop headers, `Connection: close`
    (`Connection: Upgrade` and the `Upgrade` header for a protocol switch the browser asked
    for). `Content-Length` goes when the body is chunked, as a browser would ignore it."""
    nominated = {value.lower() for value in head.values("connection")}
    chunked = bool(head.values("transfer-encoding"))
    dropped = _HOP_BY_HOP | nominated
    if chunked:
        dropped |= {"content-length"}
    if upgrade:
        dropped -= {"upgrade"}
    kept = [
        (name, value)
        for name, value in head.headers
        if name.lower() not in dropped and not name.lower().startswith(VERDICT_PREFIX)
    ]
    lines = [f"{head.version} {head.status} {head.reason}".rstrip(" ")]
    lines += [f"{name}: {value}" for name, value in kept]
    if not head.interim:
        lines.append("Connection: Upgrade" if upgrade else "Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk_size(line: bytes) -> int:
    """The size on a chunk's size line (extensions ignored)."""
    digits = line.split(b";", 1)[0].strip()
    if not digits or len(digits) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in digits):  # noqa: PLR2004
        raise BadResponseError("invalid chunk size")
    return int(digits, 16)


def _headers(lines: list[bytes]) -> tuple[tuple[str, str], ...]:
    """Header fields as a browser reads them: a folded line continues the one before, a line
    without a colon or with an invalid name is dropped, blanks around the name are ignored."""
    fields: list[tuple[str, str]] = []
    for raw in lines:
        line = raw.decode("latin-1")
        if line[:1] in {" ", "\t"}:
            if fields:
                name, value = fields[-1]
                fields[-1] = (name, f"{value} {line.strip()}".strip())
            continue
        name, sep, value = line.partition(":")
        name = name.strip(" \t")
        if sep and is_token(name):
            fields.append((name, value.strip(" \t")))
    return tuple(fields)
