"""Pages that leave state in the browser's network context (not in any origin's storage), for
the isolation tests: HTTP auth, cookies that arrive after the page has gone, client hints.

- `/isolation/secret` wants HTTP Basic auth (realm `isolation`) from `alice:s3cret` or
  `mallory:planted`: 200 titled `isolation: secret as USER`, else 401 with a challenge. A
  browser that authenticated there sends the credential unasked to every later URL under
  `/isolation/` of that origin (its auth cache), so a reader's own request shows it.
- `/isolation/plant?to=/PATH&host=HOST:PORT` navigates by script to
  `http://mallory:planted@HOST:PORT/PATH`: a page of one site planting a login for another.
- `/isolation/late?tag=T` sends `fetch(..., {keepalive: true})` at load, and another one and a
  `navigator.sendBeacon` on `pagehide`, each to `/isolation/late-cookie`, which answers
  `LATE_DELAY_S` later with the cookie `iso_late_{how}_T`: cookies that land after the page,
  and its request, have gone. The site counts per tag the late requests that arrived
  (`_state.LATE_ARRIVED`) and those that ended (`_state.LATE_ENDED`: answered, or given up
  when the browser hung up).
  With `&hold_ms=N` the pagehide requests are answered N ms later instead (a site that
  holds its answer until the context serves another request).
- `/isolation/linger?ms=N&to=URL` navigates to `URL` (a page of the test site under either
  of its names) N ms after load: a request that is still running when a held answer lands.
- `/isolation/hints?tag=T` opts in to high-entropy client hints (`Accept-CH`, `Critical-CH`).

A reader (`/isolation/read`) reports the `Authorization` user (`auth`) and the opt-in client
hints (`hints`) its own request carried; its `cookie` kind shows late cookies.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from typing import Final

import _state
from _html import document, escape, script_literal
from _params import query_int
from aiohttp import web

USERS: Final = {"alice": "s3cret", "mallory": "planted"}
"""Who `/isolation/secret` lets in."""

REALM: Final = "isolation"

LATE_DELAY_S: Final = 2.0
"""How long `/isolation/late-cookie` waits before it answers (after the wipe of its context)."""

LATE_HOWS: Final = ("load", "hide", "beacon")
"""The late requests a `/isolation/late` page makes: keepalive fetches at load and on pagehide,
and a beacon on pagehide."""

OPT_IN_HINTS: Final = ("Sec-CH-UA-Arch", "Sec-CH-UA-Full-Version-List", "Sec-CH-UA-Model")
"""High-entropy client hints a browser sends only to an origin that asked for them."""

HOST_PATTERN: Final = re.compile(r"[a-z0-9.-]{1,253}:[0-9]{1,5}")

TAG_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

MAX_HOLD_MS: Final = 20_000

LINGER_TARGET: Final = re.compile(
    r"(?:http://(?:localhost|127\.0\.0\.[12]):[0-9]{1,5})?/isolation/\S*"
)


def secret_title(user: str) -> str:
    """The title of `/isolation/secret` served to `user`."""
    return f"isolation: secret as {user}"


def auth_user(request: web.Request) -> str:
    """The user of a valid Basic `Authorization` header of `request`; "" when none."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return user if USERS.get(user) == password else ""


def opt_in_hints(request: web.Request) -> list[str]:
    """The opt-in client hints `request` carried."""
    return [name for name in OPT_IN_HINTS if name in request.headers]


def _tag(request: web.Request) -> str:
    tag = request.query.get("tag", "")
    if not TAG_PATTERN.fullmatch(tag):
        raise web.HTTPBadRequest(text="tag must be 1-64 of A-Z a-z 0-9 _ -")
    return tag


def _html(title: str, body: str, **headers: str) -> web.Response:
    return web.Response(
        text=document(title=title, body=body),
        content_type="text/html",
        headers={"Cache-Control": "no-store", **headers},
    )


async def secret(request: web.Request) -> web.Response:
    user = auth_user(request)
    if not user:
        return web.Response(
            status=401,
            text="who are you?",
            headers={"WWW-Authenticate": f'Basic realm="{REALM}"', "Cache-Control": "no-store"},
        )
    title = secret_title(user)
    return _html(title, f'<h1 id="secret">{escape(title)}</h1>')


async def plant(request: web.Request) -> web.Response:
    host = request.query.get("host", "")
    to = request.query.get("to", "")
    if not HOST_PATTERN.fullmatch(host) or not to.startswith("/isolation/"):
        raise web.HTTPBadRequest(text="host must be host:port and to a path under /isolation/")
    target = f"http://mallory:planted@{host}{to}"
    script = f"<script>location.href = {script_literal(target)};</script>"
    return _html("isolation: planting", f"<h1>Planting a login</h1>{script}")


LATE_SCRIPT: Final = """
const tag = __TAG__;
const hold = __HOLD__;
const late = (how) => "/isolation/late-cookie?how=" + how + "&tag=" + tag;
fetch(late("load"), {keepalive: true}).catch(() => {});
addEventListener("pagehide", () => {
  fetch(late("hide") + hold, {keepalive: true}).catch(() => {});
  navigator.sendBeacon(late("beacon") + hold);
});
const done = document.createElement("p");
done.id = "sent";
done.textContent = "sent";
document.body.appendChild(done);
"""


async def late(request: web.Request) -> web.Response:
    tag = _tag(request)
    hold_ms = query_int(request, "hold_ms", 0, 0, MAX_HOLD_MS)
    hold = f"&hold_ms={hold_ms}" if hold_ms else ""
    script = LATE_SCRIPT.replace("__TAG__", script_literal(tag))
    script = script.replace("__HOLD__", script_literal(hold))
    return _html("isolation: late", f"<h1>Late cookies</h1><script>{script}</script>")


async def linger(request: web.Request) -> web.Response:
    ms = query_int(request, "ms", 0, 0, MAX_HOLD_MS)
    to = request.query.get("to", "")
    if not LINGER_TARGET.fullmatch(to):
        raise web.HTTPBadRequest(text="to must be a URL of the test site under /isolation/")
    script = (
        f"<script>setTimeout(() => {{ location.href = {script_literal(to)}; }}, {ms});</script>"
    )
    return _html("isolation: lingering", f"<h1>Lingering</h1>{script}")


async def late_cookie(request: web.Request) -> web.Response:
    """Answer `LATE_DELAY_S` later with the cookie `iso_late_{how}_{tag}`; counted when it
    arrives and when it has ended (written, or cancelled by the client hanging up)."""
    tag = _tag(request)
    how = request.query.get("how", "")
    if how not in LATE_HOWS:
        raise web.HTTPBadRequest(text=f"how must be one of {LATE_HOWS}")
    request.app[_state.LATE_ARRIVED][tag] += 1
    hold_s = query_int(request, "hold_ms", int(LATE_DELAY_S * 1000), 0, MAX_HOLD_MS) / 1000
    try:
        await asyncio.sleep(hold_s)
        response = web.Response(status=204, headers={"Cache-Control": "no-store"})
        response.set_cookie(f"iso_late_{how}_{tag}", "1", max_age=3600, path="/")
        await response.prepare(request)
        await response.write_eof()
    finally:
        request.app[_state.LATE_ENDED][tag] += 1
    return response


async def hints(request: web.Request) -> web.Response:
    tag = _tag(request)
    names = ", ".join(OPT_IN_HINTS)
    return _html(
        f"isolation: hints {tag}",
        "<h1>Client hints asked for</h1>",
        **{"Accept-CH": names, "Critical-CH": names},
    )


ROUTES = (
    web.get("/isolation/secret", secret),
    web.get("/isolation/plant", plant),
    web.get("/isolation/late", late),
    web.get("/isolation/late-cookie", late_cookie),
    web.post("/isolation/late-cookie", late_cookie),
    web.get("/isolation/hints", hints),
    web.get("/isolation/linger", linger),
)
"""The network-context isolation routes."""
