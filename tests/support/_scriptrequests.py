"""Pages whose script asks its own origin for something and writes the answer into the page,
to see where a request's headers go on the requests a script makes.

`/scripted/ask?way=...` writes `<p id="answered">{way} answered: {text}</p>` once its
request answers (`answered(way, text)`), or `{way} failed` (ways in `WAYS`):

- `xhr-redirect`, `fetch-redirect`: an XHR or a `fetch()` of the page's origin that redirects
  to `target` (another host's `/scripted/said?say=...`, which any origin may read);
- `xhr-own`: an XHR of the page's origin (`/scripted/said`), no redirect;
- `event-stream`: an `EventSource` of the page's origin (`/scripted/events`), whose one event
  says what it was sent.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from _html import script_literal
from _pages import simple_page
from _params import target_param
from _routes import html
from aiohttp import web

WAYS: Final = ("xhr-redirect", "fetch-redirect", "xhr-own", "event-stream")
"""The requests `/scripted/ask` can make, see the module docstring."""

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
    return "/hostile/private-redirect?target=" + quote(target_param(request), safe="")


async def ask(request: web.Request) -> web.Response:
    """The page of the module docstring."""
    way = request.query.get("way", "")
    if way not in WAYS:
        raise web.HTTPBadRequest(text=f"way must be one of {', '.join(WAYS)}")
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


ROUTES = (
    web.get("/scripted/ask", ask),
    web.get("/scripted/said", said_text),
    web.get("/scripted/events", events),
)
"""The scripted-request routes."""
