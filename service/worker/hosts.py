"""The host a page counts against for the per-host limit (applied by the page scheduler)."""

from __future__ import annotations

from urllib.parse import urlsplit


def host_key(url: str) -> str:
    """The host a URL's page counts against (its lower-case host name, any port)."""
    return (urlsplit(url).hostname or "").lower()
