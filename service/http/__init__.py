"""HTTP: one plain request through the egress proxy (the `http` render path) and robots.txt."""

from service.http.static import StaticAnswer, StaticFetcher

__all__ = ["StaticAnswer", "StaticFetcher"]
