"""Turn browser failures into the error codes of the contract."""

from __future__ import annotations

from typing import Final

from service.contracts import ErrorCode

_NET_ERRORS: Final = (
    ("ERR_NAME_NOT_RESOLVED", ErrorCode.DNS),
    ("ERR_NAME_RESOLUTION_FAILED", ErrorCode.DNS),
    ("ERR_TUNNEL_CONNECTION_FAILED", ErrorCode.CONNECTION),
    ("ERR_CONNECTION", ErrorCode.CONNECTION),
    ("ERR_EMPTY_RESPONSE", ErrorCode.CONNECTION),
    ("ERR_ADDRESS_UNREACHABLE", ErrorCode.CONNECTION),
    ("ERR_SOCKET_NOT_CONNECTED", ErrorCode.CONNECTION),
    ("ERR_PROXY_CONNECTION_FAILED", ErrorCode.CONNECTION),
    ("ERR_TIMED_OUT", ErrorCode.TIMEOUT),
    ("ERR_CERT", ErrorCode.TLS),
    ("ERR_SSL", ErrorCode.TLS),
    ("ERR_TOO_MANY_REDIRECTS", ErrorCode.HTTP_ERROR),
    ("ERR_INVALID_URL", ErrorCode.INVALID_URL),
    ("ERR_UNSAFE_PORT", ErrorCode.BLOCKED),
    ("ERR_BLOCKED", ErrorCode.BLOCKED),
    ("ERR_ABORTED", ErrorCode.CONNECTION),
    ("Download is starting", ErrorCode.DOWNLOAD),
    ("crashed", ErrorCode.BROWSER_CRASH),
    ("Target closed", ErrorCode.BROWSER_CRASH),
    ("has been closed", ErrorCode.BROWSER_CRASH),
    ("Timeout", ErrorCode.TIMEOUT),
)
"""Substrings of Playwright's error messages, most specific first."""


def classify_browser_error(exc: Exception) -> tuple[ErrorCode, str]:
    """The contract's error code for a browser error, and a one-line message."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for needle, code in _NET_ERRORS:
        if needle in message:
            return code, message
    return ErrorCode.INTERNAL, message
