"""The answers the egress proxy gives itself instead of forwarding a request."""

from __future__ import annotations

from typing import Final

BLOCKED_HEADER: Final = "X-Crawlstream-Blocked"
"""Carries the policy's reason on a 403 for a blocked target."""

ERROR_HEADER: Final = "X-Crawlstream-Error"
"""Carries the contract's error code (`dns`, `connection`, `timeout`) on a 502."""

MAX_HEADER_VALUE: Final = 200
"""Longest reason put in a header; the rest is cut."""

ESTABLISHED: Final = b"HTTP/1.1 200 Connection Established\r\n\r\n"
"""The answer to a CONNECT whose tunnel is open."""

_REASON_PHRASES: Final = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    407: "Proxy Authentication Required",
    502: "Bad Gateway",
}


def reply(status: int, body: str, *headers: tuple[str, str]) -> bytes:
    """A complete `Connection: close` response with a plain-text body."""
    payload = (body.rstrip("\n") + "\n").encode()
    lines = [
        f"HTTP/1.1 {status} {_REASON_PHRASES.get(status, 'Error')}",
        *(f"{name}: {header_value(value)}" for name, value in headers),
        "Content-Type: text/plain; charset=utf-8",
        f"Content-Length: {len(payload)}",
        "Connection: close",
        "",
        "",
    ]
    return "\r\n".join(lines).encode("ascii") + payload


def blocked(target: str, reason: str) -> bytes:
    return reply(
        403, f"Blocked by the crawler's URL policy: {target}: {reason}", (BLOCKED_HEADER, reason)
    )


DETAIL_HEADER: Final = "X-Crawlstream-Detail"
"""Carries what an upstream proxy did on a `proxy_error` 502."""


def failed(code: str, detail: str) -> bytes:
    extra = ((DETAIL_HEADER, detail),) if code == "proxy_error" else ()
    return reply(
        502,
        f"The crawler's egress proxy could not reach the target: {detail}",
        (ERROR_HEADER, code),
        *extra,
    )


def logged_in() -> bytes:
    """The answer to a client's login request (`auth.LOGIN_PATH`)."""
    return reply(200, "Logged in to the crawler's egress proxy.")


def unauthorized(realm: str) -> bytes:
    """The challenge to a request without this worker's credential."""
    return reply(
        407,
        "This proxy serves only its own worker's browser.",
        ("Proxy-Authenticate", f'Basic realm="{realm}"'),
    )


def bad_request(detail: str) -> bytes:
    return reply(400, f"Bad proxy request: {detail}")


def header_value(value: str) -> str:
    """`value` as printable ASCII on one line, at most MAX_HEADER_VALUE characters."""
    printable = "".join(char if " " <= char <= "~" else "?" for char in value)
    return printable[:MAX_HEADER_VALUE].strip()
