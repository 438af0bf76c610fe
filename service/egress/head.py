"""The request head a browser sends to its HTTP proxy: parsed strictly, rewritten for the origin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import SplitResult, urlsplit

from service.net.hosts import browser_cleaned_url

HEAD_END: Final = b"\r\n\r\n"
"""Ends the request line and headers."""

CONNECT: Final = "CONNECT"

_VERSIONS: Final = frozenset({"HTTP/1.0", "HTTP/1.1"})
_REQUEST_LINE_PARTS: Final = 3
_MAX_PORT: Final = 65535

_TOKEN_CHARS: Final = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
"""Characters of an HTTP token (method and header names)."""

_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization"}
)
"""Headers meant for the proxy, never forwarded (`Upgrade` is kept for WebSockets)."""


class BadRequestError(ValueError):
    """The bytes are not a request this proxy serves; the answer is 400."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHead:
    """The request line and headers of one proxy request."""

    method: str
    target: str
    version: str
    headers: tuple[tuple[str, str], ...]

    @property
    def is_connect(self) -> bool:
        return self.method == CONNECT

    def header(self, name: str) -> str:
        """The comma-joined values of header `name` (case-insensitive); empty when absent."""
        wanted = name.lower()
        return ", ".join(value for key, value in self.headers if key.lower() == wanted)


def parse_head(raw: bytes) -> RequestHead:
    """The head ending in CRLF CRLF; BadRequestError for anything malformed."""
    lines = raw.removesuffix(HEAD_END).decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != _REQUEST_LINE_PARTS:
        raise BadRequestError("malformed request line")
    method, target, version = parts
    if not is_token(method) or not target or version not in _VERSIONS:
        raise BadRequestError("malformed request line")
    return RequestHead(
        method=method,
        target=target,
        version=version,
        headers=tuple(_header(line) for line in lines[1:]),
    )


def split_authority(authority: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` (a CONNECT target) as host and port."""
    host, sep, port = authority.rpartition(":")
    if not sep or not host or not _is_port(port):
        raise BadRequestError(f"invalid authority {authority!r}")
    if host.startswith("[") != host.endswith("]"):
        raise BadRequestError(f"invalid authority {authority!r}")
    return host, int(port)


def absolute_target(head: RequestHead) -> SplitResult:
    """The absolute-form URL of a plain proxy request, parsed as a browser would."""
    if "://" not in head.target:
        raise BadRequestError("the request target must be an absolute URL")
    try:
        parts = urlsplit(browser_cleaned_url(head.target))
        _ = parts.port  # reading the port validates it
    except ValueError as exc:
        raise BadRequestError(f"invalid URL ({exc})") from exc
    return parts


def wants_upgrade(head: RequestHead) -> bool:
    """Whether the request asks to switch protocols (a WebSocket over plain http)."""
    nominated = {token.strip().lower() for token in head.header("connection").split(",")}
    return "upgrade" in nominated and bool(head.header("upgrade"))


def body_length(head: RequestHead) -> int:
    """Bytes of body that follow the head: its `Content-Length`, 0 without one.

    A chunked (or otherwise encoded) request body is refused: Chromium sends none over
    HTTP/1.1, and without a length the proxy could not tell where the next request starts.
    """
    if head.header("transfer-encoding"):
        raise BadRequestError("a request body without Content-Length is not forwarded")
    lengths = {value.strip() for value in head.header("content-length").split(",") if value}
    if not lengths:
        return 0
    [length, *others] = lengths
    if others or not (length.isascii() and length.isdecimal()):
        raise BadRequestError("invalid Content-Length")
    return int(length)


def origin_head(head: RequestHead, url: SplitResult) -> bytes:
    """The head to send to the origin: origin-form target, own Host, no proxy headers.

    Keep-alive is refused (`Connection: close`) so that one upstream connection carries one
    request; a WebSocket upgrade keeps its `Connection: Upgrade`.
    """
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    nominated = {token.strip().lower() for token in head.header("connection").split(",")}
    upgrade = wants_upgrade(head)
    dropped = _HOP_BY_HOP | {"host"} | (nominated - {"upgrade"})
    lines = [f"{head.method} {path} {head.version}", f"Host: {url.netloc.rpartition('@')[2]}"]
    lines += [f"{key}: {value}" for key, value in head.headers if key.lower() not in dropped]
    lines.append("Connection: Upgrade" if upgrade else "Connection: close")
    return ("\r\n".join(lines)).encode("latin-1") + HEAD_END


def _header(line: str) -> tuple[str, str]:
    name, sep, value = line.partition(":")
    if not sep or not is_token(name):
        raise BadRequestError("malformed header line")
    return name, value.strip(" \t")


def _is_port(value: str) -> bool:
    return value.isascii() and value.isdecimal() and 0 < int(value) <= _MAX_PORT


def is_token(value: str) -> bool:
    return bool(value) and all(char in _TOKEN_CHARS for char in value)
