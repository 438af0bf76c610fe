"""Who may use the egress proxy: the holder of this worker's random credential, and no one else.

The worker makes a fresh credential at start and hands it only to its own clients (Chromium,
through Playwright's proxy settings, and the robots.txt fetcher); every request head must carry
it as `Proxy-Authorization: Basic ...`, or the answer is 407.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Final

AUTH_SCHEME: Final = "basic"
"""The only scheme accepted: Chromium and aiohttp both answer a Basic challenge."""

REALM: Final = "crawlstream"
"""Named in the 407's `Proxy-Authenticate` challenge."""

TOKEN_BYTES: Final = 24
"""Random bytes in the password (192 bits): guessing is hopeless, even at loopback speed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyCredential:
    """A user name and password for the proxy; the password never appears in a repr or log."""

    username: str
    password: str = field(repr=False)

    @classmethod
    def generate(cls) -> ProxyCredential:
        """A fresh random credential, for one worker's lifetime."""
        return cls(
            username=f"crawl-{secrets.token_hex(4)}", password=secrets.token_urlsafe(TOKEN_BYTES)
        )

    @property
    def header_value(self) -> str:
        """`Basic <base64(username:password)>`, what a client sends in `Proxy-Authorization`."""
        return "Basic " + base64.b64encode(self._pair).decode("ascii")

    def admits(self, header_value: str) -> bool:
        """Whether a `Proxy-Authorization` value carries exactly this credential.

        The comparison takes the same time wherever the first wrong byte is.
        """
        scheme, _, token = header_value.strip().partition(" ")
        if scheme.lower() != AUTH_SCHEME:
            return False
        try:
            offered = base64.b64decode(token.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(offered, self._pair)

    @property
    def _pair(self) -> bytes:
        return f"{self.username}:{self.password}".encode()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyAccess:
    """How this worker's own clients reach its egress proxy: the address and the credential."""

    url: str
    """`http://127.0.0.1:<port>`."""
    credential: ProxyCredential
