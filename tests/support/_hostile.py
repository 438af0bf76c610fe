"""Handlers of the hostile routes: pages built to hang, crash or escape a browser sandbox."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from _html import escape, script_literal
from _pages import large_page_chunks, simple_page
from _params import query_int, target_param
from _routes import html
from aiohttp import web

if TYPE_CHECKING:
    from collections.abc import Iterable

    from aiohttp.typedefs import Handler

TRICKLE_INTERVAL_SECONDS = 0.5
"""Pause between two bytes of `/hostile/trickle`."""

HUGE_DEFAULT_MB = 50
"""Default size of `/hostile/huge` in MiB."""

HUGE_MAX_MB = 4_096
"""Largest `/hostile/huge` served."""

POPUPS = 5
"""Windows `/hostile/popup` tries to open."""

DOWNLOAD_BODY = bytes(range(256)) * 4_096
"""Body of `/hostile/download`: 1 MiB of every byte value."""

BUSY_LOOP = "<script>while (true) {}</script>"

DIALOGS = """<p id="status">dialogs pending</p>
<script>
window.addEventListener('beforeunload', (event) => {
  event.preventDefault();
  event.returnValue = 'Stay on this page?';
});
window.addEventListener('load', () => {
  alert('hostile alert');
  confirm('hostile confirm?');
  prompt('hostile prompt', 'answer');
  document.getElementById('status').textContent = 'dialogs done';
});
</script>"""

POPUP = f"""<script>
for (let i = 1; i <= {POPUPS}; i++) {{
  window.open('/page/' + i, '_blank');
}}
</script>"""

NEVER_LOAD = '<p>The image below never finishes.</p>\n<img src="/hostile/trickle" alt="">'

OOM = """<script>
const hog = [];
for (;;) {
  hog.push(new Array(1024 * 1024).fill(hog.length + 0.5));
}
</script>"""


def _static(title: str, content: str) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return html(simple_page(title, content))

    return handler


async def download(request: web.Request) -> web.Response:
    headers = {"Content-Disposition": 'attachment; filename="payload.bin"'}
    return web.Response(
        body=DOWNLOAD_BODY, headers=headers, content_type="application/octet-stream"
    )


async def redirect_loop(request: web.Request) -> web.Response:
    raise web.HTTPFound("/hostile/redirect-loop")


async def trickle(request: web.Request) -> web.StreamResponse:
    """One byte every interval until the client goes away."""
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    await response.prepare(request)
    return await _stream(response, _forever(b"."), TRICKLE_INTERVAL_SECONDS)


async def huge(request: web.Request) -> web.StreamResponse:
    """A valid page of `mb` MiB, streamed section by section."""
    mb = query_int(request, "mb", HUGE_DEFAULT_MB, 1, HUGE_MAX_MB)
    response = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
    await response.prepare(request)
    chunks = (chunk.encode() for chunk in large_page_chunks(mb * 1024 * 1024))
    return await _stream(response, chunks, 0)


async def _stream(
    response: web.StreamResponse, chunks: Iterable[bytes], pause: float
) -> web.StreamResponse:
    try:
        for chunk in chunks:
            await response.write(chunk)
            await asyncio.sleep(pause)
        await response.write_eof()
    except ConnectionResetError:
        return response  # the client hung up: the expected end of a hostile stream
    return response


def _forever(chunk: bytes) -> Iterable[bytes]:
    while True:
        yield chunk


async def private_embed(request: web.Request) -> web.Response:
    target = target_param(request)
    attribute, literal = escape(target), script_literal(target)
    content = (
        f'<img src="{attribute}" alt="">\n<script src="{attribute}"></script>\n'
        f'<iframe src="{attribute}"></iframe>\n<script>\nconst target = {literal};\n'
        "fetch(target).catch(() => {});\n"
        "try { new WebSocket(target.replace(/^http/, 'ws')); } catch (error) {}\n</script>"
    )
    return html(simple_page("Private embeds", content))


async def private_redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound(target_param(request))


ROUTES = (
    web.get("/hostile/busy-loop", _static("Busy loop", BUSY_LOOP)),
    web.get("/hostile/dialogs", _static("Dialogs", DIALOGS)),
    web.get("/hostile/popup", _static("Popups", POPUP)),
    web.get("/hostile/never-load", _static("Never loads", NEVER_LOAD)),
    web.get("/hostile/oom", _static("Out of memory", OOM)),
    web.get("/hostile/download", download),
    web.get("/hostile/redirect-loop", redirect_loop),
    web.get("/hostile/trickle", trickle),
    web.get("/hostile/huge", huge),
    web.get("/hostile/private-embed", private_embed),
    web.get("/hostile/private-redirect", private_redirect),
)
"""The hostile routes."""
