"""A request's identity options as a browser context: the arguments it is made with, what it
gets at each hand-over (cookies, the geolocation permission), and the key of the contexts a
request may reuse (only those made with equal options)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from service.browser.headers import context_headers
from service.contracts_identity import IDENTITY_FIELDS
from service.devices import descriptor

if TYPE_CHECKING:
    from playwright._impl._api_structures import SetCookieParam
    from playwright.async_api import BrowserContext

    from service.contracts import CrawlOptions
    from service.contracts_identity import Cookie

VIEWPORT: Final = {"width": 1280, "height": 800}
"""The window of a context whose request names neither a viewport nor a device."""

GEOLOCATION: Final = ["geolocation"]


def context_key(options: CrawlOptions) -> str:
    """The canonical form of the request's identity options that differ from the defaults;
    "" for a request with none (it shares today's pools: spares and wiped contexts)."""
    named = options.model_dump(mode="json", include=set(IDENTITY_FIELDS), exclude_defaults=True)
    return json.dumps(named, sort_keys=True, separators=(",", ":")) if named else ""


def context_arguments(options: CrawlOptions) -> dict[str, Any]:
    """Playwright `new_context` arguments of the request's identity (a device first, then the
    request's own viewport and user agent over it)."""
    arguments: dict[str, Any] = {"viewport": VIEWPORT}
    if options.device is not None:
        arguments.update(descriptor(options.device))
    if options.viewport is not None:
        arguments["viewport"] = options.viewport.model_dump()
    if options.user_agent is not None:
        arguments["user_agent"] = options.user_agent
    headers = context_headers(options)
    if headers is not None:
        arguments["extra_http_headers"] = headers
    if options.locale is not None:
        arguments["locale"] = options.locale
    if options.timezone is not None:
        arguments["timezone_id"] = options.timezone
    if options.geolocation is not None:
        arguments["geolocation"] = options.geolocation.model_dump()
    if not options.javascript:
        arguments["java_script_enabled"] = False
    if options.skip_tls_verification:
        arguments["ignore_https_errors"] = True
    return arguments


async def hand_over(context: BrowserContext, options: CrawlOptions) -> None:
    """What the request's context gets each time a request takes it (a wipe clears cookies
    and permissions): its cookies, and the geolocation permission."""
    if options.cookies:
        await context.add_cookies([playwright_cookie(cookie) for cookie in options.cookies])
    if options.geolocation is not None:
        await context.grant_permissions(GEOLOCATION)


def playwright_cookie(cookie: Cookie) -> SetCookieParam:
    made: SetCookieParam = {"name": cookie.name, "value": cookie.value}
    if cookie.url is not None:  # the URL's host, at path `/` (as the HTTP path sends it)
        parts = urlsplit(cookie.url)
        made["url"] = f"{parts.scheme}://{parts.netloc}/"
    if cookie.domain is not None:
        made["domain"] = cookie.domain
    if cookie.path is not None:
        made["path"] = cookie.path
    if cookie.expires is not None:
        made["expires"] = cookie.expires
    made["httpOnly"] = cookie.http_only
    made["secure"] = cookie.secure
    if cookie.same_site is not None:
        made["sameSite"] = cookie.same_site
    return made
