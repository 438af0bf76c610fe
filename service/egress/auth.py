"""Who may use the egress proxy: the holders of this worker's credentials, and no one else.

The worker makes a fresh credential and a fresh secret at start and hands them only to its own
clients: the worker's credential to its HTTP clients (robots.txt, the HTTP-first path), and to
each browser context a credential of its own, derived from the secret (its password is an HMAC
of its user name), through Playwright's per-context proxy settings. Every request head must
carry one of them as `Proxy-Authorization: Basic ...`, or the answer is 407; the user name then
says whose the connection is (see `owners`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Final, Protocol

AUTH_SCHEME: Final = "basic"
"""The only scheme accepted: Chromium and aiohttp both answer a Basic challenge."""

REALM: Final = "crawlstream"
"""Named in the 407's `Proxy-Authenticate` challenge."""

TOKEN_BYTES: Final = 24
"""Random bytes in the password (192 bits): guessing is hopeless, even at loopback speed."""

SECRET_BYTES: Final = 32
"""Random bytes of the secret context credentials are derived from."""

CONTEXT_PREFIX: Final = "ctx-"
"""User names of browser contexts' credentials start with this."""

CONTEXT_ID_BYTES: Final = 8
"""Random bytes in a context credential's user name."""

LOGIN_PATH: Final = "/.crawlstream/login"
"""A plain request for this path of the proxy's own address is answered by the proxy itself
(200, once the credential is checked): what a browser context loads to log in."""


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
        offered = _offered_pair(header_value)
        return offered is not None and hmac.compare_digest(offered, self._pair)

    @property
    def _pair(self) -> bytes:
        return f"{self.username}:{self.password}".encode()


def _offered_pair(header_value: str) -> bytes | None:
    """The `user:password` bytes of a `Basic` value; None for anything else."""
    scheme, _, token = header_value.strip().partition(" ")
    if scheme.lower() != AUTH_SCHEME:
        return None
    try:
        return base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyKeys:
    """The worker's credential and the secret browser contexts' credentials derive from."""

    worker: ProxyCredential
    secret: bytes = field(repr=False)

    @classmethod
    def generate(cls, worker: ProxyCredential | None = None) -> ProxyKeys:
        return cls(
            worker=worker or ProxyCredential.generate(), secret=secrets.token_bytes(SECRET_BYTES)
        )

    def for_context(self) -> ProxyCredential:
        """A credential of its own for one browser context."""
        username = CONTEXT_PREFIX + secrets.token_hex(CONTEXT_ID_BYTES)
        return ProxyCredential(username=username, password=self._password(username))

    def owner(self, header_value: str) -> str | None:
        """The user name of the credential a `Proxy-Authorization` value carries, when it is
        the worker's or one derived from the secret; None for anything else (the answer is
        407). Comparisons take the same time wherever the first wrong byte is."""
        if self.worker.admits(header_value):
            return self.worker.username
        pair = _offered_pair(header_value)
        username, sep, password = (pair or b"").partition(b":")
        if not sep or not username.startswith(CONTEXT_PREFIX.encode()):
            return None
        name = username.decode("ascii", errors="replace")
        expected = self._password(name).encode()
        return name if hmac.compare_digest(password, expected) else None

    def _password(self, username: str) -> str:
        digest = hmac.new(self.secret, username.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


class OwnerSeals(Protocol):
    """Shuts one context credential out of the egress proxy for a while (its wipe)."""

    def seal(self, owner: str) -> None:
        """Close `owner`'s connections and refuse its new ones until `unseal`."""

    def unseal(self, owner: str) -> None:
        """Let `owner` in again (or forget it: its context is closed)."""


class UpstreamRoutes(Protocol):
    """Sends one credential's connections on through an upstream proxy (`upstream.py`)."""

    def route(self, owner: str, proxy: str) -> None:
        """From now on `owner`'s connections go through `proxy` (a URL or a pool's name)."""

    def unroute(self, owner: str) -> None:
        """`owner`'s connections go straight to their targets again (or: it is forgotten)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyAccess:
    """How this worker's own clients reach its egress proxy: the address and the credentials."""

    url: str
    """`http://127.0.0.1:<port>`."""
    keys: ProxyKeys
    seals: OwnerSeals | None = None
    """The proxy's seals, so a context being wiped can be shut out (None: a proxy without)."""
    routes: UpstreamRoutes | None = None
    """The proxy's upstream routes, for requests that name a `proxy` (None: a proxy without)."""

    @property
    def credential(self) -> ProxyCredential:
        """The worker's own credential (its HTTP clients)."""
        return self.keys.worker

    @property
    def login_url(self) -> str:
        """What a browser context loads to log in to the proxy (`LOGIN_PATH`)."""
        return self.url + LOGIN_PATH

    def for_context(self) -> ProxyCredential:
        """A fresh credential for one browser context, so the proxy can tell whose a
        connection is."""
        return self.keys.for_context()
