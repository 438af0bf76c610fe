"""Routes that try to abuse the egress proxy: forged proxy verdicts, a login challenge, and a
page that holds as many connections as it can."""

from __future__ import annotations

import asyncio

from _pages import simple_page
from _params import query_int
from _routes import html
from aiohttp import web

FORGED_TEXT = "A page of its own, whatever its headers claim"
"""What every forged-verdict page says: a result that is ok carries it."""

BLOCKED_HEADER = "X-Crawlstream-Blocked"
ERROR_HEADER = "X-Crawlstream-Error"
"""The egress proxy's verdict headers, as a site would forge them."""

HOG_DEFAULT = 200
"""WebSockets and hanging fetches `/abuse/hog` opens by default (each)."""

HOG_MAX = 2_000
"""Most of each `/abuse/hog` opens."""

HANG_SECONDS = 3_600.0
"""How long `/abuse/hang` and `/abuse/ws-hold` keep a connection: longer than any test."""

HOG = """<p id="status">opening</p>
<script>
const sockets = [], pending = [];
for (let i = 0; i < {count}; i++) {{
  sockets.push(new WebSocket(`ws://${{location.host}}/abuse/ws-hold?n=${{i}}`));
  pending.push(fetch(`/abuse/hang?n=${{i}}`).catch(() => {{}}));
}}
document.getElementById('status').textContent = 'hogging';
</script>"""


async def forged_blocked(request: web.Request) -> web.Response:
    """A 200 page claiming to be the proxy's refusal (status from `status`, 200 by default)."""
    status = query_int(request, "status", 200, 200, 599)
    response = html(simple_page("Forged refusal", f"<p>{FORGED_TEXT}</p>"), status=status)
    response.headers[BLOCKED_HEADER] = "loopback"
    return response


async def forged_error(request: web.Request) -> web.Response:
    """A page claiming to be the proxy's `{code}` failure (status from `status`, 200)."""
    status = query_int(request, "status", 200, 200, 599)
    response = html(simple_page("Forged failure", f"<p>{FORGED_TEXT}</p>"), status=status)
    response.headers[ERROR_HEADER] = request.match_info["code"]
    return response


async def basic_challenge(request: web.Request) -> web.Response:
    """401 with a Basic challenge to every request, with or without credentials."""
    response = html(simple_page("Login required", "<p>Who are you?</p>"), status=401)
    response.headers["WWW-Authenticate"] = 'Basic realm="abuse"'
    return response


async def hog(request: web.Request) -> web.Response:
    """A page that opens `count` WebSockets and `count` fetches that are never answered."""
    count = query_int(request, "count", HOG_DEFAULT, 1, HOG_MAX)
    return html(simple_page("Connection hog", HOG.format(count=count)))


async def hang(request: web.Request) -> web.Response:
    """Never answers (until the client goes away or the site stops)."""
    await asyncio.sleep(HANG_SECONDS)
    return html(simple_page("Late", "<p>too late</p>"))


async def ws_hold(request: web.Request) -> web.WebSocketResponse:
    """A WebSocket that stays open and silent."""
    socket = web.WebSocketResponse()
    await socket.prepare(request)
    async with asyncio.timeout(HANG_SECONDS):
        async for _ in socket:
            pass
    return socket


ROUTES = (
    web.get("/abuse/forged-blocked", forged_blocked),
    web.get("/abuse/forged-error/{code}", forged_error),
    web.get("/abuse/basic-auth", basic_challenge),
    web.get("/abuse/hog", hog),
    web.get("/abuse/hang", hang),
    web.get("/abuse/ws-hold", ws_hold),
)
"""The proxy-abuse routes."""
