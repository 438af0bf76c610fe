"""Test-site pages for the page cache: plain pages, pages with an `ETag` or a
`Last-Modified` that answer conditional requests with 304, pages marked `no-store` or
`private`, and a way to change a page (its `ETag` and its words change).

Every answer is counted in `CACHE_ANSWERS` under `"<path> <status>"`, so a test tells a
full fetch (200) from a revalidation (304).
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from aiohttp import web

CACHE_ANSWERS = web.AppKey("cache_answers", Counter[str])
"""Answers of `/cache/...` pages, keyed `"<path> <status>"`."""

VERSIONS = web.AppKey("cache_versions", Counter[str])
"""How many times each `/cache/...` page was changed (`POST /cache/change/...`)."""

LAST_MODIFIED: Final = "Wed, 01 Jan 2025 00:00:00 GMT"
"""The `Last-Modified` of the `/cache/lastmod/...` pages."""

KINDS: Final = frozenset({"plain", "etag", "lastmod", "nostore", "private"})


def page_words(path: str, version: int) -> str:
    """The words only the page at `path`, in its `version`, holds."""
    return f"Cached page {path} version {version}"


def _document(path: str, version: int) -> str:
    words = page_words(path, version)
    return (
        f"<!doctype html><html><head><title>{path}</title></head>"
        f"<body><main><h1>{words}</h1><p>{words} in a paragraph.</p>"
        f'<a href="{_linked(path)}">a link</a></main></body></html>'
    )


def _linked(path: str) -> str:
    """The page a `/cache/...` page links to (for deep crawls over entries)."""
    return "/cache/plain/linked-from" + path.replace("/", "-")


async def cache_page(request: web.Request) -> web.Response:
    kind = request.match_info["kind"]
    if kind not in KINDS:
        raise web.HTTPNotFound
    path = request.path
    version = request.app[VERSIONS][path]
    etag = f'"{path}-{version}"'
    headers = {"Content-Type": "text/html; charset=utf-8"}
    if kind == "etag":
        headers["ETag"] = etag
        if request.headers.get("If-None-Match") == etag:
            return _counted(request, web.Response(status=304, headers={"ETag": etag}))
    if kind == "lastmod":
        headers["Last-Modified"] = LAST_MODIFIED
        if request.headers.get("If-Modified-Since") == LAST_MODIFIED:
            return _counted(request, web.Response(status=304))
    if kind in {"nostore", "private"}:
        headers["Cache-Control"] = "no-store" if kind == "nostore" else "private, max-age=600"
    return _counted(request, web.Response(text=_document(path, version), headers=headers))


async def change(request: web.Request) -> web.Response:
    """`POST /cache/change/<kind>/<name>`: the page's words and `ETag` change."""
    path = "/cache/" + request.match_info["rest"]
    request.app[VERSIONS][path] += 1
    return web.Response(text=str(request.app[VERSIONS][path]))


def _counted(request: web.Request, response: web.Response) -> web.Response:
    request.app[CACHE_ANSWERS][f"{request.path} {response.status}"] += 1
    return response


def install(app: web.Application) -> None:
    app[CACHE_ANSWERS] = Counter()
    app[VERSIONS] = Counter()


ROUTES = (
    web.post("/cache/change/{rest:.+}", change),
    web.get("/cache/{kind}/{name}", cache_page),
)
