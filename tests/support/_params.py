"""Strict parsing of the test site's query and path parameters."""

from __future__ import annotations

from aiohttp import web


def int_param(raw: str | None, *, name: str, default: int, low: int, high: int) -> int:
    """An integer within [low, high]; absent means `default`; anything else is a 400."""
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer") from None
    if not low <= value <= high:
        raise web.HTTPBadRequest(text=f"{name} must be between {low} and {high}")
    return value


def query_int(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter, see int_param."""
    raw = request.query.get(name)
    return int_param(raw, name=name, default=default, low=low, high=high)


def path_int(request: web.Request, name: str, low: int, high: int) -> int:
    """An integer path parameter, see int_param."""
    raw = request.match_info[name]
    return int_param(raw, name=name, default=low, low=low, high=high)


def target_param(request: web.Request) -> str:
    """The `target` query parameter: an absolute http(s) URL."""
    target = request.query.get("target", "")
    if not target.startswith(("http://", "https://")):
        raise web.HTTPBadRequest(text="target must be an absolute http(s) URL")
    return target
