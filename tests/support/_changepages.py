"""Test-site pages for change tracking: pages whose words change when a test says so, that
carry noise changing on every load (a clock, a nonce, a script, a style, attributes), and
that can be removed (404 from then on).

`/changes/p/<name>` answers version N of its words (`POST /changes/edit/<name>` makes it
N + 1); `POST /changes/remove/<name>` makes it answer 404. `/changes/hub/<name>` links to
`/changes/p/<name>-<i>` for i in 0..3, except those `POST /changes/unlink/<name>/<i>` took
out (for deep crawls).
"""

from __future__ import annotations

from collections import Counter

from aiohttp import web

VERSIONS = web.AppKey("change_versions", Counter[str])
"""Edits of each `/changes/p/<name>` page."""

LOADS = web.AppKey("change_loads", Counter[str])
"""Loads of each page: its noise is made of this count."""

REMOVED = web.AppKey("change_removed", set[str])
"""Names of the pages that answer 404."""

UNLINKED = web.AppKey("change_unlinked", set[str])
"""`<hub>/<i>` of the hubs' links taken out."""

HUB_LINKS = 4


def version_words(name: str, version: int) -> str:
    """The line of the page `name` that its `version` changes."""
    return f"Price of {name} is {100 + version} EUR"


def _document(name: str, version: int, load: int) -> str:
    return (
        "<!doctype html><html><head><title>Tracked</title>"
        f"<style>.c{load} {{ color: #{load:06d}; }}</style>"
        f'<script nonce="n{load}">window.loaded = {load};</script></head>'
        f'<body><main class="c{load}" data-render="{load}">'
        f"<h1>Tracked page {name}</h1>"
        f"<p>{version_words(name, version)}</p>"
        "<p>Words that never change.</p>"
        f"<p>Updated <time datetime='2026-01-01T00:00:{load % 60:02d}Z'>{load} seconds ago</time>"
        "</p>"
        f'<form><input type="hidden" name="csrf" value="token-{load}"></form>'
        f'<a href="/changes/p/{name}?cb={load}">this page</a>'
        "</main></body></html>"
    )


async def tracked_page(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name in request.app[REMOVED]:
        raise web.HTTPNotFound
    request.app[LOADS][name] += 1
    html = _document(name, request.app[VERSIONS][name], request.app[LOADS][name])
    return web.Response(text=html, content_type="text/html")


async def hub(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    links = "".join(
        f'<li><a href="/changes/p/{name}-{i}">page {i}</a></li>'
        for i in range(HUB_LINKS)
        if f"{name}/{i}" not in request.app[UNLINKED]
    )
    words = f"<p>The pages of {name}, as this hub lists them today.</p>"
    html = f"<html><body><main><h1>Hub {name}</h1>{words}<ul>{links}</ul></main></body></html>"
    return web.Response(text=html, content_type="text/html")


async def unlink(request: web.Request) -> web.Response:
    request.app[UNLINKED].add(f"{request.match_info['name']}/{request.match_info['i']}")
    return web.Response(text="unlinked")


async def edit(request: web.Request) -> web.Response:
    request.app[VERSIONS][request.match_info["name"]] += 1
    return web.Response(text="edited")


async def remove(request: web.Request) -> web.Response:
    request.app[REMOVED].add(request.match_info["name"])
    return web.Response(text="removed")


def install(app: web.Application) -> None:
    app[VERSIONS] = Counter()
    app[LOADS] = Counter()
    app[REMOVED] = set()
    app[UNLINKED] = set()


ROUTES = (
    web.get("/changes/p/{name}", tracked_page),
    web.post("/changes/edit/{name}", edit),
    web.post("/changes/remove/{name}", remove),
    web.get("/changes/hub/{name}", hub),
    web.post("/changes/unlink/{name}/{i}", unlink),
)
