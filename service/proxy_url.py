"""An upstream proxy named by a URL (`http://`, `https://` or `socks5://`, credentials
optional): parsed without I/O, so the contract, the settings and the egress proxy share one
reading of it. The credentials are never part of its label or of an error message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal
from urllib.parse import unquote, urlsplit

UpstreamScheme = Literal["http", "https", "socks5"]

SCHEMES: Final = frozenset({"http", "https", "socks5"})

DEFAULT_PORTS: Final = {"http": 8080, "https": 443, "socks5": 1080}


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamProxy:
    scheme: UpstreamScheme
    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    label: str
    """What logs and messages call it: its pool's name, or its host:port."""
    trusted: bool = False
    """From `CRAWL_PROXIES`: its own address is not checked by the URL policy."""

    @classmethod
    def parse(cls, url: str, *, pool: str | None = None) -> UpstreamProxy:
        """The proxy at `url`; ValueError (without the credentials) when it is none."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES or not parts.hostname:
            raise ValueError("a proxy is an http://, https:// or socks5:// URL with a host")
        if parts.path not in {"", "/"} or parts.query or parts.fragment:
            raise ValueError("a proxy URL has no path, query or fragment")
        try:
            port = parts.port or DEFAULT_PORTS[scheme]
        except ValueError:
            raise ValueError("the proxy URL's port is not a port") from None
        host = parts.hostname
        return cls(
            scheme=scheme,  # type: ignore[arg-type]
            host=host,
            port=port,
            username=unquote(parts.username) if parts.username is not None else None,
            password=unquote(parts.password) if parts.password is not None else None,
            label=pool or f"{host}:{port}",
            trusted=pool is not None,
        )


def is_proxy_url(spec: str) -> bool:
    return "://" in spec
