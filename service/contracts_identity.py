"""The request identity options of `CrawlOptions`: what a page is sent and what the browser
claims to be (headers, cookies, user agent, locale, time zone, geolocation, viewport, device,
scripts on or off). Part of the wire contract (`contracts/`)."""

from __future__ import annotations

import re
import zoneinfo
from functools import cache
from typing import Annotated, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    model_validator,
)

from service.devices import device_names, suggestions
from service.proxy_url import UpstreamProxy, is_proxy_url

MAX_HEADERS: Final = 64
"""Extra headers per request."""

MAX_COOKIES: Final = 100
"""Cookies per request."""

HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)
"""Headers that belong to one connection (RFC 9110 section 7.6.1) or to the proxy's
routing: a request may not set them (`Host` would aim a request elsewhere than its URL)."""

_TOKEN: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")
"""An HTTP field name (RFC 9110 token)."""

_FIELD_VALUE: Final = re.compile(r"^[\t\x20-\x7e\x80-\xff]{0,8192}$")
"""A field value without control characters (no CR or LF: no header injection)."""

_LOCALE: Final = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,4}$")
"""A BCP 47 language tag, as `navigator.language` reports it."""


def _headers(headers: dict[str, str]) -> dict[str, str]:
    """`headers` when each name is a token a request may set and each value is clean."""
    for name, value in headers.items():
        lowered = name.lower()
        if lowered in HOP_BY_HOP or lowered.startswith("proxy-"):
            message = f"header {name!r} is hop-by-hop or the proxy's: a request cannot set it"
            raise ValueError(message)
        if not _TOKEN.match(name):
            raise ValueError(f"header name {name!r} is not an HTTP token")
        if not _FIELD_VALUE.match(value):
            raise ValueError(f"header {name!r}: the value holds control characters")
    return headers


def _device(name: str) -> str:
    if name not in device_names():
        raise ValueError(f"unknown device {name!r}; Playwright's names, e.g. {suggestions()}")
    return name


def _locale(tag: str) -> str:
    if not _LOCALE.match(tag):
        raise ValueError(f"locale {tag!r} is not a language tag such as `de-DE`")
    return tag


NOT_BROWSER_ZONES: Final = frozenset({"localtime"})
"""Names the time zone database lists that Chromium refuses (`Invalid timezone ID`): the
machine's own zone. The `right/` and `posix/` variants are refused too; they are not in
`zoneinfo.available_timezones()`."""


@cache
def _browser_zones() -> frozenset[str]:
    """IANA zone names a browser context accepts (checked against Chromium: all of the
    database's names but `NOT_BROWSER_ZONES`)."""
    return frozenset(zoneinfo.available_timezones() - NOT_BROWSER_ZONES)


def _timezone(name: str) -> str:
    if name not in _browser_zones():
        message = f"time zone {name!r} is not an IANA name such as `Europe/Berlin`"
        raise ValueError(message)
    return name


_POOL_NAME: Final = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def _proxy(spec: str, info: ValidationInfo) -> str:
    """A proxy URL that parses, or the name of a pool the worker has (when the validation
    context lists them as `proxy_pools`); the error never repeats the URL (credentials)."""

    if is_proxy_url(spec):
        UpstreamProxy.parse(spec)
        return spec
    context = info.context if isinstance(info.context, dict) else {}
    pools = context.get("proxy_pools")
    if not _POOL_NAME.match(spec) or (pools is not None and spec not in pools):
        known = ", ".join(repr(name) for name in sorted(pools or ())) or "none"
        raise ValueError(f"proxy {spec!r} is neither a proxy URL nor a pool (pools: {known})")
    return spec


Headers = Annotated[dict[str, str], Field(max_length=MAX_HEADERS), AfterValidator(_headers)]
HeadersScope = Literal["origin", "all"]
"""Where a request's `headers` go (see `CrawlOptions.headers_scope`)."""
DeviceName = Annotated[str, AfterValidator(_device)]
Locale = Annotated[str, AfterValidator(_locale)]
TimeZone = Annotated[str, StringConstraints(max_length=64), AfterValidator(_timezone)]
UserAgent = Annotated[
    str, StringConstraints(min_length=1, max_length=1024, pattern=r"^[\x20-\x7e]+$")
]
ProxySpec = Annotated[str, StringConstraints(min_length=1, max_length=2048)]
ProxyOption = Annotated[ProxySpec, AfterValidator(_proxy)]
CookieText = Annotated[str, StringConstraints(max_length=4096, pattern=r"^[^\x00-\x1f;\x7f]*$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Cookie(_Strict):
    """A cookie the request's pages are sent (where it matches, as a browser matches it)."""

    name: Annotated[CookieText, StringConstraints(min_length=1)]
    value: CookieText
    url: Annotated[str, StringConstraints(pattern=r"^https?://", max_length=4096)] | None = None
    """The cookie is that URL's host's (host-only), at path `/`; or give `domain` and `path`."""
    domain: Annotated[str, StringConstraints(min_length=1, max_length=253)] | None = None
    """A leading dot (or none) matches the domain and its subdomains, as browsers do."""
    path: Annotated[str, StringConstraints(pattern=r"^/", max_length=1024)] | None = None
    expires: float | None = None
    """Unix time in seconds; absent: a session cookie. An expired cookie is not sent."""
    http_only: bool = False
    secure: bool = False
    """Sent to https URLs only."""
    same_site: Literal["Strict", "Lax", "None"] | None = None

    @model_validator(mode="after")
    def _placed(self) -> Cookie:
        if self.url is not None and (self.domain is not None or self.path is not None):
            raise ValueError(f"cookie {self.name!r}: give `url` or `domain` and `path`, not both")
        if self.url is None and (self.domain is None or self.path is None):
            raise ValueError(f"cookie {self.name!r}: needs `url`, or `domain` and `path`")
        return self


class Geolocation(_Strict):
    """Where the browser says it is; the geolocation permission is granted with it."""

    latitude: float = Field(ge=-90, le=90)
    longitude: float = Field(ge=-180, le=180)
    accuracy: float = Field(default=0, ge=0)
    """Metres."""


class Viewport(_Strict):
    """The browser window's inner size in CSS pixels."""

    width: int = Field(ge=100, le=7680)
    height: int = Field(ge=100, le=7680)


IDENTITY_FIELDS: Final = (
    "headers",
    "headers_scope",
    "cookies",
    "user_agent",
    "locale",
    "timezone",
    "geolocation",
    "viewport",
    "device",
    "javascript",
    "proxy",
    "skip_tls_verification",
)
"""The `CrawlOptions` fields a browser context is made with: contexts are reused only between
requests equal in all of them."""

BROWSER_ONLY_FIELDS: Final = ("locale", "timezone", "geolocation", "viewport", "device")
"""Identity options only a browser can honour: under `render: auto` they send pages to it."""

__all__ = [
    "BROWSER_ONLY_FIELDS",
    "IDENTITY_FIELDS",
    "Cookie",
    "DeviceName",
    "Geolocation",
    "Headers",
    "HeadersScope",
    "Locale",
    "ProxyOption",
    "TimeZone",
    "UserAgent",
    "Viewport",
]
