"""robots.txt: may the crawler (user-agent token `crawlstream`) fetch a URL?

`RobotsCache` keeps the parsed rules of each origin (scheme, host, port) for `ROBOTS_TTL_S`,
at most `MAX_ORIGINS` of them (least recently used go first), and loads an origin's file once
however many pages ask at the same moment. `HttpRobotsSource` fetches the file with aiohttp
through the egress proxy (with the proxy's credential), so the URL policy judges it (and its
redirects) like any page.
Rules are read by `urllib.robotparser`: the group naming `crawlstream` applies, else `*`, and
within a group the first line matching the path decides (not RFC 9309's longest match).

What an answer means (RFC 9309 asks for "disallow all" on 5xx; we choose availability and
document it):

- 2xx: the file's rules apply.
- 4xx (no file, or forbidden): everything is allowed.
- 5xx, a timeout or no connection: everything is allowed, remembered only for
  `FAILURE_TTL_S` so the file is asked for again soon.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, Self
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

import aiohttp
from aiohttp import hdrs

from service.logs import get_logger
from service.net.policy import DEFAULT_PORTS

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from aiohttp import ClientHandlerType

    from service.egress.auth import ProxyAccess

__all__ = [
    "USER_AGENT",
    "HttpRobotsSource",
    "Origin",
    "RobotsCache",
    "RobotsFile",
    "RobotsSource",
    "rules_from",
]

log = get_logger(__name__)

USER_AGENT: Final = "crawlstream"
"""The token robots.txt groups are matched against."""

ROBOTS_TTL_S: Final = 3600.0
"""How long an origin's rules are kept before its robots.txt is fetched again."""

FAILURE_TTL_S: Final = 300.0
"""How long an unavailable robots.txt (5xx, timeout, no connection) counts as allow-all."""

MAX_ORIGINS: Final = 1024
"""Origins whose rules are kept at once; the least recently used are forgotten first."""

ROBOTS_DEADLINE_S: Final = 10.0
"""Deadline for fetching one robots.txt, redirects included."""

MAX_ROBOTS_BYTES: Final = 512 * 1024
"""Bytes of a robots.txt that are read; the rest is ignored (Google reads 500 KiB)."""

_CHUNK_BYTES: Final = 64 * 1024

_OK: Final = range(200, 300)
_SERVER_ERROR_FROM: Final = 500
_PROXY_AUTH_REQUIRED: Final = 407


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a robots.txt applies: one scheme, host and port."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of(cls, url: str) -> Origin:
        """The origin of an http(s) URL; `ValueError` for anything else."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"no robots.txt for {url!r}")
        return cls(scheme, parts.hostname.lower(), parts.port or DEFAULT_PORTS[scheme])

    @property
    def serialized(self) -> str:
        """`scheme://host[:port]`, the port only when it is not the scheme's default: how
        browsers name an origin (and key its storage)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == DEFAULT_PORTS[self.scheme] else f":{self.port}"
        return f"{self.scheme}://{host}{port}"

    @property
    def robots_url(self) -> str:
        return f"{self.serialized}/robots.txt"


@dataclass(frozen=True, slots=True, kw_only=True)
class RobotsFile:
    """What asking for a robots.txt gave: its status (None: no answer) and its text."""

    status: int | None
    text: str = ""

    @property
    def ttl_s(self) -> float:
        failed = self.status is None or self.status >= _SERVER_ERROR_FROM
        return FAILURE_TTL_S if failed else ROBOTS_TTL_S


def rules_from(answer: RobotsFile) -> RobotFileParser:
    """The rules an answer stands for: the file's on 2xx, allow-all otherwise."""
    parser = RobotFileParser()
    parser.parse(answer.text.splitlines() if answer.status in _OK else [])
    return parser


class RobotsSource(Protocol):
    """Fetches robots.txt files; never raises for network trouble (status None instead)."""

    async def fetch(self, url: str) -> RobotsFile: ...


@dataclass(slots=True)
class _Cached:
    rules: RobotFileParser
    expires_at: float


class RobotsCache:
    """Parsed robots.txt rules per origin, loaded on demand; an async context manager whose
    exit cancels loads still running."""

    def __init__(
        self,
        source: RobotsSource,
        *,
        max_origins: int = MAX_ORIGINS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._max_origins = max_origins
        self._clock = clock
        self._rules: OrderedDict[Origin, _Cached] = OrderedDict()
        self._loading: dict[Origin, asyncio.Task[RobotFileParser]] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __len__(self) -> int:
        """Origins whose rules are kept now."""
        return len(self._rules)

    async def allowed(self, url: str) -> bool:
        """Whether robots.txt lets `USER_AGENT` fetch `url`."""
        rules = await self._rules_of(Origin.of(url))
        return rules.can_fetch(USER_AGENT, url)

    async def _rules_of(self, origin: Origin) -> RobotFileParser:
        cached = self._rules.get(origin)
        if cached is not None and cached.expires_at > self._clock():
            self._rules.move_to_end(origin)
            return cached.rules
        task = self._loading.get(origin)
        if task is None:
            task = asyncio.create_task(self._load(origin))
            self._loading[origin] = task
            task.add_done_callback(lambda _: self._loading.pop(origin, None))
        return await asyncio.shield(task)  # one waiter's cancellation leaves the load to others

    async def _load(self, origin: Origin) -> RobotFileParser:
        answer = await self._source.fetch(origin.robots_url)
        rules = rules_from(answer)
        self._rules[origin] = _Cached(rules, self._clock() + answer.ttl_s)
        self._rules.move_to_end(origin)
        while len(self._rules) > self._max_origins:
            self._rules.popitem(last=False)
        log.debug("robots.loaded", origin=origin.robots_url, status=answer.status)
        return rules


class HttpRobotsSource:
    """Fetches robots.txt with aiohttp through the egress proxy that `proxy` leads to."""

    def __init__(self, proxy: ProxyAccess, *, deadline_s: float = ROBOTS_DEADLINE_S) -> None:
        self._proxy_url = proxy.url
        self._proxy_headers = {hdrs.PROXY_AUTHORIZATION: proxy.credential.header_value}
        self._deadline_s = deadline_s
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(
            headers={"User-Agent": USER_AGENT},
            timeout=aiohttp.ClientTimeout(total=self._deadline_s),
            middlewares=(self._authorize_plain_request,),
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def _authorize_plain_request(
        self, request: aiohttp.ClientRequest, handler: ClientHandlerType
    ) -> aiohttp.ClientResponse:
        """Put the credential on a plain-http request, which goes to the proxy as it is.

        aiohttp sends `proxy_headers` only on a CONNECT (https); this runs for every redirect
        hop too. Inside a tunnel the credential is never sent.
        """
        if not request.is_ssl():
            request.headers.update(self._proxy_headers)
        return await handler(request)

    async def fetch(self, url: str, *, max_bytes: int = MAX_ROBOTS_BYTES) -> RobotsFile:
        """GET `url` (a robots.txt, or a sitemap) through the proxy, its first `max_bytes`."""
        if self._session is None:
            raise RuntimeError("HttpRobotsSource is used outside its `async with`")
        try:
            async with (
                asyncio.timeout(self._deadline_s),
                self._session.get(
                    url, proxy=self._proxy_url, proxy_headers=self._proxy_headers
                ) as response,
            ):
                body = await _read_capped(response, max_bytes)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.info("robots.unavailable", url=url, error=repr(exc))
            return RobotsFile(status=None)
        if response.status == _PROXY_AUTH_REQUIRED:  # our own proxy, not the site, said no
            log.warning("robots.proxy_refused", url=url)
            return RobotsFile(status=None)
        return RobotsFile(status=response.status, text=body.decode("utf-8", errors="replace"))


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    body = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK_BYTES):
        body += chunk
        if len(body) >= max_bytes:
            break  # leaving the response unread makes aiohttp drop the connection
    return bytes(body[:max_bytes])
