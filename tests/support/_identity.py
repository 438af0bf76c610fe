"""Test-site pages for request identity and page actions: a page that reports what it saw
(the request's headers and cookies, echoed by the server; what its scripts read of the
browser), a "load more" button, a form whose answer is the next page, an infinite scroll."""

from __future__ import annotations

import html
import json
from typing import Final

from aiohttp import web

SEEN_SCRIPT: Final = """
const lines = [
  `ua=${navigator.userAgent}`,
  `language=${navigator.language}`,
  `timezone=${Intl.DateTimeFormat().resolvedOptions().timeZone}`,
  `width=${window.innerWidth}`,
  `touch=${navigator.maxTouchPoints > 0 && 'ontouchstart' in window}`,
  `document-cookie=${document.cookie}`,
];
function done(more) {
  document.getElementById('client').textContent = lines.concat(more).join('\\n');
  const mark = document.createElement('p');
  mark.id = 'done';
  mark.textContent = 'client read';
  document.body.append(mark);
}
if (location.search.includes('geo=1')) {
  navigator.geolocation.getCurrentPosition(
    (p) => done([`geo=${p.coords.latitude},${p.coords.longitude}`]),
    (e) => done([`geo=error ${e.code}`]),
    {timeout: 5000},
  );
} else {
  done([]);
}
"""


async def seen(request: web.Request) -> web.Response:
    """What the server received (`header:<name>=<value>`, `cookie:<name>=<value>` lines) and,
    once its script ran, what the browser told the page (`<what>=<value>` lines)."""
    server = [f"header:{name.lower()}={value}" for name, value in request.headers.items()]
    server += [f"cookie:{name}={value}" for name, value in request.cookies.items()]
    body = (
        "<!doctype html><html><head><title>What the page saw</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<style>pre { white-space: pre-wrap; overflow-wrap: anywhere; }</style></head><body>"
        f"<h1>Seen</h1><pre id='server'>{html.escape(chr(10).join(server))}</pre>"
        f"<pre id='client'></pre><script>{SEEN_SCRIPT}</script></body></html>"
    )
    return web.Response(text=body, content_type="text/html")


LOAD_MORE: Final = """<!doctype html><html><head><title>Load more</title></head><body>
<h1>Catalogue</h1><p>First part of the list.</p><div id="more"></div>
<button id="load" onclick="setTimeout(() => {
  document.getElementById('more').innerHTML = '<p id=revealed>Hidden second part</p>';
}, 100)">Load more</button></body></html>"""

FORM: Final = """<!doctype html><html><head><title>Search</title></head><body>
<h1>Search the shop</h1><form action="/actions/answer" method="get">
<input id="q" name="q"><input type="submit" id="go" value="Go"></form></body></html>"""

SCROLL: Final = """<!doctype html><html><head><title>Feed</title></head><body><h1>Feed</h1>
<ol id="feed"></ol><script>
let next = 1;
function add(count) {
  const feed = document.getElementById('feed');
  for (let i = 0; i < count && next <= 60; i++, next++) {
    const item = document.createElement('li');
    item.textContent = `Feed item ${next}`;
    item.style.height = '120px';
    feed.append(item);
  }
}
add(20);
window.addEventListener('scroll', () => {
  if (window.innerHeight + window.scrollY >= document.body.scrollHeight - 10) {
    const busyUntil = performance.now() + BUSY_MS;
    while (performance.now() < busyUntil) {}
    setTimeout(() => add(20), 150);
  }
});
</script></body></html>"""
"""An infinite feed of 60 items, 20 more 150 ms after each scroll to the bottom; its scroll
handler first keeps the page's main thread busy for BUSY_MS (a heavy page, or a renderer that
gets no CPU on a loaded machine)."""


def _page(text: str) -> web.RequestHandler:
    async def handler(_request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/html")

    return handler


async def answer(request: web.Request) -> web.Response:
    """The form's next page: what was searched for."""
    query = html.escape(request.query.get("q", ""))
    return web.Response(
        text=f"<!doctype html><html><head><title>Results</title></head><body>"
        f"<h1>Results for {query}</h1><p>Searched: {json.dumps(query)}</p></body></html>",
        content_type="text/html",
    )


ROUTES = (
    web.get("/identity/seen", seen),
    web.get("/actions/load-more", _page(LOAD_MORE)),
    web.get("/actions/form", _page(FORM)),
    web.get("/actions/answer", answer),
    web.get("/actions/scroll", _page(SCROLL.replace("BUSY_MS", "0"))),
    web.get("/actions/scroll-busy", _page(SCROLL.replace("BUSY_MS", "1500"))),
)
"""The identity and action routes."""
