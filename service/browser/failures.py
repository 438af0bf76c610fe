"""Turn browser failures into the error codes of the contract.

`internal` is left for failures nothing here explains: a bug in the worker or in Playwright.
Anything Chromium reports as a network error (`net::ERR_*`) is about the target, never a bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from service.contracts import ALLOWED_SCHEMES, ErrorCode
from service.egress.refusals import UPSTREAM_FAILED
from service.errors import CrawlstreamError

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
    ("ERR_INVALID_REDIRECT", ErrorCode.INVALID_URL),
    ("Cannot navigate to invalid URL", ErrorCode.INVALID_URL),
    ("ERR_UNSAFE_PORT", ErrorCode.BLOCKED),
    ("ERR_UNSAFE_REDIRECT", ErrorCode.BLOCKED),
    ("ERR_UNKNOWN_URL_SCHEME", ErrorCode.BLOCKED),
    ("ERR_DISALLOWED_URL_SCHEME", ErrorCode.BLOCKED),
    ("ERR_BLOCKED", ErrorCode.BLOCKED),
    ("ERR_ABORTED", ErrorCode.CONNECTION),
    ("Download is starting", ErrorCode.DOWNLOAD),
    ("crashed", ErrorCode.BROWSER_CRASH),
    ("Target closed", ErrorCode.BROWSER_CRASH),
    ("has been closed", ErrorCode.BROWSER_CRASH),
    ("Timeout", ErrorCode.TIMEOUT),
    ("net::ERR_", ErrorCode.CONNECTION),
)
"""Substrings of Playwright's error messages, most specific first; the last one catches every
other network error Chromium reports."""


_AUTH_ERRORS: Final = ("ERR_INVALID_AUTH_CREDENTIALS", "ERR_UNEXPECTED_PROXY_AUTH")
"""How Chromium gives up on an authentication challenge it cannot answer. With proxy
credentials Playwright takes every challenge over the DevTools protocol and leaves a site's to
the browser, which, headless and without a login, gives up on it this way."""


class PageFailedError(CrawlstreamError):
    """The page ends with a failed result: `code` and `message` go onto it."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedNavigation:
    """What is known about a main-frame navigation the browser gave up."""

    error: str
    """Chromium's error, e.g. `net::ERR_ABORTED` (Playwright's message or request failure)."""
    url: str
    """The last URL the navigation requested (after server redirects)."""
    status: int | None = None
    """Status of the answer to that URL, when one came."""
    refused: str | None = None
    """The egress proxy's reason, when it refused the host and port of `url`."""
    renderer_died: bool = False
    """The page's renderer process was gone when the navigation failed (killed, e.g. by the
    kernel's OOM killer): Chromium then aborts the navigation as it does for a download."""

    @property
    def challenged(self) -> bool:
        """The server answered with a challenge for credentials (401, or 407 from a site
        inside a tunnel): the browser has none to give and drops the answer with
        `ERR_INVALID_AUTH_CREDENTIALS` (or `ERR_UNEXPECTED_PROXY_AUTH`). The site did answer:
        an HTTP error with that status, not a broken network."""
        return self.status is not None and any(error in self.error for error in _AUTH_ERRORS)

    @property
    def answered_without_page(self) -> bool:
        """The server answered with nothing to show (204, 205, a download): the browser stays
        on the document it had."""
        return self.status is not None and "ERR_ABORTED" in self.error and not self.renderer_died


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def classify_browser_error(exc: Exception) -> tuple[ErrorCode, str]:
    """The contract's error code for a browser error, and a one-line message."""
    message = first_line(exc)
    return classify_message(message), message


def classify_message(message: str) -> ErrorCode:
    for needle, code in _NET_ERRORS:
        if needle in message:
            return code
    return ErrorCode.INTERNAL


def classify_navigation(failure: FailedNavigation) -> tuple[ErrorCode, str]:
    """The error code of a failed main-frame navigation, with what caused it where known."""
    if failure.renderer_died:
        return ErrorCode.BROWSER_CRASH, (
            f"{failure.url}: the page's renderer died while loading it (killed, e.g. out of memory)"
        )
    if failure.refused is not None and failure.refused.startswith(UPSTREAM_FAILED):
        detail = failure.refused.removeprefix(UPSTREAM_FAILED)
        return ErrorCode.PROXY_ERROR, f"{failure.url}: {detail}"
    blocked = _blocked(failure)
    if blocked is not None:
        return ErrorCode.BLOCKED, blocked
    answered = _answered(failure)
    if answered is not None:
        return answered
    code = classify_message(failure.error)
    if code == ErrorCode.INTERNAL:
        code = ErrorCode.CONNECTION
    message = failure.error.removeprefix("Page.goto: ")
    return code, message if failure.url in message else f"{message} at {failure.url}"


def _blocked(failure: FailedNavigation) -> str | None:
    """Why a failed navigation counts as `blocked`, or None when it does not."""
    scheme = urlsplit(failure.url).scheme.lower()
    if failure.refused is not None:
        return f"{failure.url}: refused by the URL policy ({failure.refused})"
    if scheme not in ALLOWED_SCHEMES:
        return f"a redirect to {scheme}: ({failure.url}) is not followed"
    if "ERR_UNSAFE_REDIRECT" in failure.error or "ERR_UNKNOWN_URL_SCHEME" in failure.error:
        return f"{failure.url} redirects to a URL that is not http(s)"
    if "ERR_ABORTED" in failure.error and failure.status is None:
        # Chromium drops a redirect to javascript: or view-source: this way: no answer to show.
        return (
            f"{failure.url}: the browser abandoned the navigation without an answer"
            " (a redirect to a javascript: or view-source: URL)"
        )
    return None


def _answered(failure: FailedNavigation) -> tuple[ErrorCode, str] | None:
    """The code of a navigation the server did answer, though the browser shows nothing."""
    if failure.challenged:
        return (
            ErrorCode.HTTP_ERROR,
            f"HTTP {failure.status} (asks for credentials) at {failure.url}",
        )
    if failure.answered_without_page:
        return ErrorCode.DOWNLOAD, f"{failure.url}: the answer is not a page (a download)"
    return None
