"""Pages whose script asks its own origin for something and writes the answer into the page,
to see where a request's headers go on the requests a script makes.

`/scripted/ask?way=...` writes `<p id="answered">{way} answered: {text}</p>` once its
request answers (`answered(way, text)`), or `{way} failed` (ways in `WAYS`):

- `xhr-redirect`, `fetch-redirect`: an XHR or a `fetch()` of the page's origin that redirects
  to `target` (another host's `/scripted/said?say=...`, which any origin may read);
- `xhr-own`: an XHR of the page's origin (`/scripted/said`), no redirect;
- `event-stream`: an `EventSource` of the page's origin (`/scripted/events`), whose one event
  says what it was sent;
- `long-poll` (`LONG_POLL`): an XHR of the page's origin (`/scripted/hold`) answered only
  after `HOLD_S`; the site counts the holds that `arrived` and `ended` (answered, or given up
  when the client hung up) in `HELD`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Final
from urllib.parse import quote

from _html import script_literal
from _pages import simple_page
from _params import target_param
from _routes import html
from aiohttp import web

WAYS: Final = ("xhr-redirect", "fetch-redirect", "xhr-own", "event-stream")
"""The requests `/scripted/ask` can make that answer, see the module docstring."""

LONG_POLL: Final = "long-poll"
"""The request `/scripted/ask` can make that does not answer within a page's time."""

HOLD_S: Final = 600.0
"""How long `/scripted/hold` holds its answer."""

HELD = web.AppKey("held", Counter[str])
"""Requests of `/scripted/hold` that `arrived` and that `ended`."""

RECONNECT_MS: Final = 600_000
"""An event stream's reconnection delay: the page closes it at its first event anyway."""

ASK: Final = """
const done = (text) => {
  const p = document.createElement('p'); p.id = 'answered'; p.textContent = text;
  document.body.append(p);
};
const failed = () => done(way + ' failed');
if (way === 'event-stream') {
  const events = new EventSource(url);
  events.onmessage = (event) => { events.close(); done(way + ' answered: ' + event.data); };
  events.onerror = () => { events.close(); failed(); };
} else if (way === 'fetch-redirect') {
  fetch(url).then((r) => r.text()).then((t) => done(way + ' answered: ' + t), failed);
} else {
  const xhr = new XMLHttpRequest();
  xhr.open('GET', url);
  xhr.onload = () => done(way + ' answered: ' + xhr.responseText);
  xhr.onerror = failed;
  xhr.send();
}
"""


def answered(way: str, text: str) -> str:
    """What `/scripted/ask?way={way}` writes once its request answered `text`."""
    return f"{way} answered: {text}"


def said(say: str) -> str:
    """What `/scripted/said?say={say}` and `/scripted/events?say={say}` answer."""
    return f"said {say}"


def _asked_url(request: web.Request, way: str) -> str:
    if way == "xhr-own":
        return f"/scripted/said?say={quote(way)}"
    if way == "event-stream":
        return f"/scripted/events?say={quote(way)}"
    if way == LONG_POLL:
        return "/scripted/hold"
    return "/hostile/private-redirect?target=" + quote(target_param(request), safe="")


async def ask(request: web.Request) -> web.Response:
    """The page of the module docstring."""
    way = request.query.get("way", "")
    if way not in (*WAYS, LONG_POLL):
        raise web.HTTPBadRequest(text=f"way must be one of {', '.join((*WAYS, LONG_POLL))}")
    script = (
        f"<script>\nconst way = {script_literal(way)};\n"
        f"const url = {script_literal(_asked_url(request, way))};\n{ASK}</script>"
    )
    return html(simple_page(f"Asks by {way}", "<p>asking</p>" + script))


async def said_text(request: web.Request) -> web.Response:
    """A text any origin may read: `said(say)`."""
    text = said(request.query.get("say", ""))
    return web.Response(text=text, headers={"Access-Control-Allow-Origin": "*"})


async def events(request: web.Request) -> web.StreamResponse:
    """An event stream of one event, `said(say)`, then its end."""
    data = said(request.query.get("say", "")).replace("\n", " ")
    body = f"retry: {RECONNECT_MS}\ndata: {data}\n\n"
    return web.Response(text=body, content_type="text/event-stream")


async def hold(request: web.Request) -> web.Response:
    """A long poll: an answer after `HOLD_S`, unless the client hangs up first."""
    held = request.app[HELD]
    held["arrived"] += 1
    try:
        await asyncio.sleep(HOLD_S)
    finally:
        held["ended"] += 1
    return web.Response(text="held")


def install(app: web.Application) -> None:
    app[HELD] = Counter()


ROUTES = (
    web.get("/scripted/ask", ask),
    web.get("/scripted/said", said_text),
    web.get("/scripted/events", events),
    web.get("/scripted/hold", hold),
)
"""The scripted-request routes."""
