"""The egress proxy's verdict on an answer it gave instead of the target, as a failed page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from service.content.page import PageContent, failed
from service.contracts import ErrorCode

if TYPE_CHECKING:
    from collections.abc import Mapping

HTTP_FORBIDDEN: Final = 403
"""The egress proxy's status for a target the URL policy forbids."""

HTTP_BAD_GATEWAY: Final = 502
"""The egress proxy's status for a target it could not resolve or reach."""

BLOCKED_HEADER: Final = "x-crawlstream-blocked"
"""Set by the egress proxy on its 403 for a target the URL policy forbids."""

ERROR_HEADER: Final = "x-crawlstream-error"
"""Set by the egress proxy when a target could not be resolved or reached."""

DETAIL_HEADER: Final = "x-crawlstream-detail"
"""Set by the egress proxy on a `proxy_error`: what the upstream proxy did (named by its pool
or host, never its credentials)."""

_PROXY_CODES: Final = frozenset(
    {ErrorCode.DNS, ErrorCode.CONNECTION, ErrorCode.TIMEOUT, ErrorCode.PROXY_ERROR}
)


def proxy_refusal(url: str, status: int, headers: Mapping[str, str]) -> PageContent | None:
    """The result when the answer to a request for `url` is the egress proxy's own: only a
    plain-http answer can be (the proxy strips its verdict headers from every site's answer it
    forwards; an https answer comes through a tunnel, from the site itself). See
    `proxy_verdict` for what the verdict looks like."""
    if urlsplit(url).scheme.lower() != "http":
        return None
    return proxy_verdict(url, status, headers)


def proxy_verdict(url: str, status: int, headers: Mapping[str, str]) -> PageContent | None:
    """The result when `headers` (lower-case names, or a case-insensitive mapping) carry the
    egress proxy's verdict on `url`: 403 with `x-crawlstream-blocked` for a target the policy
    forbids, 502 with `x-crawlstream-error` for one it could not resolve or reach. Use it on
    answers only the proxy gives (plain http, a CONNECT's answer)."""
    if status == HTTP_FORBIDDEN and BLOCKED_HEADER in headers:
        return failed(ErrorCode.BLOCKED, f"{url}: {headers[BLOCKED_HEADER]}")
    code = headers.get(ERROR_HEADER)
    if status == HTTP_BAD_GATEWAY and code is not None and code in _PROXY_CODES:
        if code == ErrorCode.PROXY_ERROR and DETAIL_HEADER in headers:
            return failed(ErrorCode.PROXY_ERROR, f"{url}: {headers[DETAIL_HEADER]}")
        return failed(ErrorCode(code), f"{code} error for {url}")
    return None
