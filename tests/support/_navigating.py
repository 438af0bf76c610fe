"""Handlers of ordinary pages that move on by themselves or embed other documents.

Meta refresh, script redirects, `history.pushState`, redirects to any scheme, iframes and very
long titles: common on the web, none of them a fault of the crawler. `{key}` in a path only
names the request in the site's hit counts.
"""

from __future__ import annotations

from _html import escape, script_literal
from _pages import simple_page
from _params import query_int
from _routes import html
from aiohttp import web

FINAL_PATH = "/nav/final"
"""Where the redirecting pages lead by default."""

FINAL_TITLE = "Final page"

FINAL_TEXT = "Final content"

PUSHED_PATH = "/nav/pushed"
"""The URL `/nav/push-state` shows after its `history.pushState`."""

PUSHED_TEXT = "Pushed content"

REFRESH_MAX_S = 600
"""Longest meta refresh delay `/nav/meta-refresh` declares."""

TITLE_MAX_CHARS = 10_000_000
"""Longest title `/nav/long-title` builds."""

HOPS_MAX = 20
"""Longest chain `/nav/hops/{k}` builds."""

_REDIRECT_SCRIPTS = {
    "inline": "location.replace({to});",
    "load": "addEventListener('load', () => {{ location.href = {to}; }});",
    "timer": "addEventListener('load', () => setTimeout(() => {{ location.href = {to}; }}, 0));",
}
"""When `/nav/script-redirect` leaves: while parsing, in its load event, or just after."""


def _target(request: web.Request) -> str:
    return request.query.get("to", FINAL_PATH)


async def final(request: web.Request) -> web.Response:
    return html(simple_page(FINAL_TITLE, f'<p id="final">{FINAL_TEXT}</p>'))


async def meta_refresh(request: web.Request) -> web.Response:
    delay = query_int(request, "delay_s", 0, 0, REFRESH_MAX_S)
    content = escape(f"{delay}; url={_target(request)}")
    head = f'<meta http-equiv="refresh" content="{content}">\n'
    body = f"<h1>Moved</h1>\n<p>Leaving in {delay} s.</p>"
    return html(f"<!DOCTYPE html>\n<html><head><title>Moved</title>\n{head}</head>{body}</html>")


async def script_redirect(request: web.Request) -> web.Response:
    when = request.query.get("when", "inline")
    if when not in _REDIRECT_SCRIPTS:
        raise web.HTTPBadRequest(text=f"when must be one of {sorted(_REDIRECT_SCRIPTS)}")
    script = _REDIRECT_SCRIPTS[when].format(to=script_literal(_target(request)))
    return html(simple_page("Moving", f"<p>Leaving.</p>\n<script>{script}</script>"))


async def hops(request: web.Request) -> web.Response:
    """`/nav/hops/{k}`: leaves for `/nav/hops/{k-1}` in its load event; 0 is the final page."""
    left = int(request.match_info["k"])
    if left > HOPS_MAX:
        raise web.HTTPBadRequest(text=f"at most {HOPS_MAX} hops")
    if left == 0:
        return await final(request)
    target = script_literal(f"/nav/hops/{left - 1}")
    script = f"addEventListener('load', () => {{ location.href = {target}; }});"
    return html(simple_page(f"Hop {left}", f"<p>Hop {left}.</p>\n<script>{script}</script>"))


async def push_state(request: web.Request) -> web.Response:
    script = f"history.pushState({{}}, '', {script_literal(PUSHED_PATH)});"
    return html(simple_page("Pushed", f"<p>{PUSHED_TEXT}</p>\n<script>{script}</script>"))


async def redirect_anywhere(request: web.Request) -> web.Response:
    """A 302 to `to` as given, whatever its scheme."""
    raise web.HTTPFound(_target(request))


async def iframes(request: web.Request) -> web.Response:
    """A page made of frames: same site, srcdoc, one that refreshes itself, one that redirects."""
    frames = (
        f'<iframe src="{FINAL_PATH}"></iframe>',
        '<iframe srcdoc="&lt;p&gt;Inline frame&lt;/p&gt;"></iframe>',
        '<iframe src="/nav/meta-refresh/frame?delay_s=0&amp;to=/page/3"></iframe>',
        '<iframe src="/nav/script-redirect/frame?when=load&amp;to=/page/4"></iframe>',
    )
    return html(simple_page("Frames", "<p>Outer content</p>\n" + "\n".join(frames)))


async def long_title(request: web.Request) -> web.Response:
    chars = query_int(request, "chars", 100_000, 1, TITLE_MAX_CHARS)
    title = ("Long title " * (chars // 11 + 1))[:chars]
    return html(simple_page(title, "<p>A page with a very long title.</p>"))


ROUTES = (
    web.get(FINAL_PATH, final),
    web.get(r"/nav/meta-refresh/{key}", meta_refresh),
    web.get(r"/nav/script-redirect/{key}", script_redirect),
    web.get(r"/nav/hops/{k:\d+}", hops),
    web.get("/nav/push-state", push_state),
    web.get(r"/nav/redirect/{key}", redirect_anywhere),
    web.get("/nav/iframes", iframes),
    web.get("/nav/long-title", long_title),
)
"""The self-navigating and framed routes."""
