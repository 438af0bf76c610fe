"""The HTTP forward proxy every browser request goes through, so the URL policy sees them all.

It is closed: only this worker's clients can use it. Every request head must carry one of the
worker's credentials (`Proxy-Authorization: Basic ...`: the worker's own, for its HTTP clients,
or the one each browser context gets through Playwright's proxy settings), or the answer is
407; targets are reached only on the egress ports (80 and 443 unless configured) or a port the
allowlist opens. The credential's user name says whose a connection is: one browser context
holds at most `per_context` connections (its next one closes its least recently active one),
and of the `max_connections` held at once, a newcomer at a full proxy closes the least recently
active connection of the owner holding more than its fair share, or is closed at once when
none does (counted, and reported in one log line at most every 10 s). Each connection has a
deadline for its request head and for silence while relaying.

Chromium is launched with `--proxy-server=http://127.0.0.1:<port>` and
`--proxy-bypass-list=<-loopback>` (Playwright: `proxy={"server": ..., "bypass": "<-loopback>",
"username": ..., "password": ...}`, per context), so first navigations, redirects,
subresources, fetch/XHR and WebSockets all arrive here, even those to loopback. For each
request the proxy checks the target, resolves it once and connects to exactly the address it
checked (no DNS-rebinding gap), then: `CONNECT host:port` tunnels bytes both ways (https,
wss); an absolute-form plain HTTP request is one exchange (`exchange.py`): the head rewritten
to origin-form, the answer's head rewritten for the browser (`Connection: close`, no
`X-Crawlstream-*` header of the site's), the body relayed as framed, then both connections
close, so every request on a browser connection is one the proxy parsed (a WebSocket upgrade
becomes a tunnel after its 101).

A credential with an upstream route (a request's `proxy`: `route`) reaches its checked
targets through that upstream proxy instead (`upstream.py`); a proxy that fails answers 502
with `X-Crawlstream-Error: proxy_error`.

Refusals are answers the browser can show: 403 with `X-Crawlstream-Blocked: <reason>` for a
blocked target; 502 with `X-Crawlstream-Error: dns|connection|timeout` for one that cannot be
reached (or whose answer cannot be passed on); 400 for anything that is not a proxy request;
407 without a credential. A plain request for `LOGIN_PATH` of the proxy's own address, with a
credential, is answered 200 by the proxy itself: how a browser context logs in before its
first request that Chromium cannot log in with (`browser/proxy_login.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Self

from service.egress import replies
from service.egress.auth import LOGIN_PATH, REALM, ProxyAccess, ProxyCredential, ProxyKeys
from service.egress.exchange import Exchange
from service.egress.head import (
    HEAD_END,
    BadRequestError,
    RequestHead,
    absolute_target,
    body_length,
    origin_head,
    parse_head,
    split_authority,
)
from service.egress.owners import DEFAULT_PER_OWNER, ConnectionOwners
from service.egress.refusals import UPSTREAM_FAILED
from service.egress.response import BadResponseError
from service.egress.slots import ConnectionSlots, descriptors_needed
from service.egress.tunnel import Activity, Stream, Tunnel, open_upstream
from service.egress.upstream import UpstreamError, UpstreamPools, connect_via
from service.logs import get_logger
from service.net.policy import DEFAULT_PORTS, BlockedUrlError, UnresolvableHostError

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from service.net.ip_ranges import IPAddress
    from service.net.policy import UrlPolicy
    from service.settings import Settings

__all__ = [
    "BLOCKED_HEADER",
    "ERROR_HEADER",
    "EgressProxy",
    "ProxyAccess",
    "ProxyCredential",
    "ProxyKeys",
    "ProxyTimeouts",
]

BLOCKED_HEADER: Final = replies.BLOCKED_HEADER
ERROR_HEADER: Final = replies.ERROR_HEADER

MAX_HEAD_BYTES: Final = 64 * 1024
"""Largest request head (request line and headers) read from the browser."""

LOOPBACK: Final = "127.0.0.1"

DEFAULT_MAX_CONNECTIONS: Final = 512
"""Connections held at once unless told otherwise (see `CRAWL_EGRESS_MAX_CONNECTIONS`)."""

log = get_logger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyTimeouts:
    """Deadlines of the proxy's network waits, in seconds."""

    head_s: float = 10.0
    """For a client to send a complete request head. Chromium sends its head as soon as it is
    connected; 10 s is also how long Chromium keeps an unused connection before closing it."""
    connect_s: float = 10.0
    """For the TCP connection to the target (all its checked addresses together)."""
    idle_s: float = 120.0
    """A relay with no byte in either direction for this long is closed."""
    reply_s: float = 5.0
    """For writing a refusal or the CONNECT answer to the browser."""


@dataclass(eq=False, slots=True, kw_only=True)
class _Connection:
    """One browser connection the proxy holds: its task, when it last moved a byte, and
    whether it still counts against the cap (an evicted one stops counting at once)."""

    task: asyncio.Task[object]
    client: Stream
    activity: Activity
    counted: bool = True

    @property
    def last_active(self) -> float:
        return self.activity.last

    def evict(self) -> None:
        """Close it now: both its sockets, whatever it was waiting for."""
        self.client.abort()
        self.task.cancel()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Target:
    """Where one request goes: `label` is what the policy's verdict is reported against."""

    host: str
    port: int
    label: str


class EgressProxy:
    """`async with EgressProxy(policy) as proxy:` serves on `127.0.0.1:{proxy.port}` to the
    holders of `proxy.access` (its address and credential).

    `on_blocked(target, reason)` is called for every refused target: the absolute URL of a
    plain request, `host:port` of a CONNECT (where the browser shows only a network error),
    before the browser is answered.
    """

    def __init__(
        self,
        policy: UrlPolicy,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        credential: ProxyCredential | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        per_context: int = DEFAULT_PER_OWNER,
        on_blocked: Callable[[str, str], None] | None = None,
        timeouts: ProxyTimeouts | None = None,
        upstreams: UpstreamPools | None = None,
    ) -> None:
        self._policy = policy
        self._upstreams = upstreams or UpstreamPools({})
        self._routes: dict[str, str] = {}
        """The upstream proxy (a URL or a pool's name) of each credential that has one."""
        self._bind = (host, port)
        self._keys = ProxyKeys.generate(credential)
        self._slots = ConnectionSlots(capacity=max_connections)
        self._owners: ConnectionOwners[_Connection] = ConnectionOwners(
            capacity=max_connections,
            per_owner=per_context,
            exempt=frozenset({self._keys.worker.username}),
        )
        self._sealed: set[str] = set()
        """Context credentials shut out while their context is wiped (`seal`)."""
        self._on_blocked = on_blocked
        self._timeouts = timeouts or ProxyTimeouts()
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[object], _Connection] = {}
        self._closing = False
        self.blocked_total = 0
        """Requests refused by the policy since start."""
        self.unauthorized_total = 0
        """Requests answered 407 (no or a wrong credential) since start."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        policy: UrlPolicy,
        *,
        on_blocked: Callable[[str, str], None] | None = None,
    ) -> EgressProxy:
        return cls(
            policy,
            max_connections=settings.egress_max_connections,
            per_context=settings.egress_connections_per_context,
            on_blocked=on_blocked,
            upstreams=UpstreamPools(settings.proxies),
        )

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the egress proxy is not running; use it with `async with`")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`: the browser's proxy server."""
        return f"http://{self._bind[0]}:{self.port}"

    @property
    def access(self) -> ProxyAccess:
        """What a client of this worker needs to use the proxy; pass it on, never log it."""
        return ProxyAccess(url=self.url, keys=self._keys, seals=self, routes=self)

    def route(self, owner: str, proxy: str) -> None:
        """`owner`'s connections go through the upstream `proxy` (a URL or a pool's name)
        from now on, each target checked by the policy first."""
        self._routes[owner] = proxy

    def unroute(self, owner: str) -> None:
        self._routes.pop(owner, None)

    def seal(self, owner: str) -> None:
        """Close every connection of credential `owner` and refuse its new ones until
        `unseal`: while a context is wiped, nothing its last request sent (a keepalive fetch,
        a beacon whose answer the site holds back) can land in it, and nothing leaves."""
        self._sealed.add(owner)
        for connection in self._owners.of(owner):
            self._evict(connection, "sealed")

    def unseal(self, owner: str) -> None:
        """Let credential `owner` in again (also: forget it, its context is closed)."""
        self._sealed.discard(owner)

    @property
    def active_connections(self) -> int:
        return len(self._connections)

    @property
    def evicted_total(self) -> int:
        """Connections closed to make room: past an owner's limit, or for a newcomer."""
        return self._owners.evicted_total

    def held_by(self, owner: str) -> int:
        """Connections the holder of credential user name `owner` has open now."""
        return self._owners.held(owner)

    @property
    def refused_total(self) -> int:
        """Connections closed at once because `max_connections` were open."""
        return self._slots.refused_total

    async def __aenter__(self) -> Self:
        host, port = self._bind
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEAD_BYTES)
        log.info(
            "proxy.started",
            port=self.port,
            max_connections=self._slots.capacity,
            per_context=self._owners.per_owner,
        )
        _warn_if_descriptors_short(self._slots.capacity)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        while self._connections:
            pending = list(self._connections)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._timeouts.reply_s):
                    await self._server.wait_closed()
        log.info(
            "proxy.stopped",
            blocked_total=self.blocked_total,
            unauthorized_total=self.unauthorized_total,
            refused_total=self.refused_total,
            evicted_total=self.evicted_total,
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or self._closing:
            writer.transport.abort()
            return
        if not self._admit():
            writer.transport.abort()
            self._report_refusals()
            return
        client = Stream(reader=reader, writer=writer)
        connection = _Connection(task=task, client=client, activity=Activity())
        self._connections[task] = connection
        try:
            await self._handle(connection)
        except asyncio.CancelledError:
            # __aexit__ and evictions cancel these tasks, and this is their outermost frame:
            # ending normally keeps Python 3.11's stream callback from logging a cancelled task.
            pass
        except Exception:  # a loop boundary: one broken connection must not stop the proxy
            log.exception("proxy.connection_failed")
        finally:
            self._connections.pop(task, None)
            self._uncount(connection)
            writer.close()
            self._report_refusals()  # what was refused since the last line, once it is due

    def _admit(self) -> bool:
        """Take a slot for a new connection, evicting a greedy owner's one when full."""
        if self._slots.open >= self._slots.capacity:
            victim = self._owners.victim_for_newcomer()
            if victim is not None:
                self._evict(victim, "proxy_full")
        return self._slots.admit()

    def _evict(self, victim: _Connection, reason: str) -> None:
        self._uncount(victim)
        victim.evict()
        log.debug("proxy.evicted", reason=reason)

    def _uncount(self, connection: _Connection) -> None:
        """The connection stops counting against the cap and its owner's limit (once)."""
        self._owners.forget(connection)
        if connection.counted:
            connection.counted = False
            self._slots.release()

    def _report_refusals(self) -> None:
        refused = self._slots.refusals_to_report()
        if refused:
            log.warning(
                "proxy.saturated",
                refused=refused,
                refused_total=self._slots.refused_total,
                max_connections=self._slots.capacity,
            )

    async def _handle(self, connection: _Connection) -> None:
        client = connection.client
        head = await self._read_head(client)
        if head is None:
            return
        owner = self._keys.owner(head.header("proxy-authorization"))
        if owner is None:
            self.unauthorized_total += 1
            await self._send(client, replies.unauthorized(REALM))
            return
        if owner in self._sealed:
            await self._send(client, replies.failed("connection", "the browser context is wiped"))
            return
        if head.target == self.url + LOGIN_PATH:
            await self._send(client, replies.logged_in())
            return
        own = self._owners.attribute(connection, owner)
        if own is not None:
            self._evict(own, "context_limit")
        try:
            target = _target_of(head, self._policy)
            addresses = await self._policy.resolve_and_check(target.host, target.port)
        except BadRequestError as exc:
            await self._send(client, replies.bad_request(str(exc)))
        except BlockedUrlError as exc:
            await self._refuse(client, head.target, exc.reason)
        except UnresolvableHostError as exc:
            await self._send(client, replies.failed("dns", str(exc)))
        else:
            await self._relay(connection, head, target, addresses, self._routes.get(owner))

    async def _read_head(self, client: Stream) -> RequestHead | None:
        """The request head; None (after answering 400 where useful) when there is none."""
        try:
            async with asyncio.timeout(self._timeouts.head_s):
                raw = await client.reader.readuntil(HEAD_END)
            return parse_head(raw)
        except asyncio.LimitOverrunError:
            await self._send(client, replies.bad_request("request head too large"))
        except BadRequestError as exc:
            await self._send(client, replies.bad_request(str(exc)))
        except (asyncio.IncompleteReadError, TimeoutError, OSError):
            pass  # the browser closed the connection or never finished its request
        return None

    async def _relay(
        self,
        connection: _Connection,
        head: RequestHead,
        target: _Target,
        addresses: list[IPAddress],
        via: str | None = None,
    ) -> None:
        client, activity = connection.client, connection.activity
        try:
            if via is None:
                upstream = await open_upstream(addresses, target.port, self._timeouts.connect_s)
            else:
                upstream = await self._through(via, target)
        except UpstreamError as exc:
            log.info("proxy.upstream_failed", target=target.label, error=str(exc))
            if head.is_connect and self._on_blocked is not None:  # the browser sees no 502
                self._on_blocked(target.label, f"{UPSTREAM_FAILED}{exc}")
            await self._send(client, replies.failed("proxy_error", str(exc)))
            return
        except TimeoutError:
            await self._send(client, replies.failed("timeout", f"connecting to {target.label}"))
            return
        except OSError as exc:
            await self._send(client, replies.failed("connection", f"{target.label}: {exc}"))
            return
        try:
            if head.is_connect:
                await self._send(client, replies.ESTABLISHED, close=False)
                idle_s = self._timeouts.idle_s
                await Tunnel(
                    client=client, upstream=upstream, idle_s=idle_s, activity=activity
                ).run()
            else:
                await self._exchange(connection, upstream, head, target)
        finally:
            upstream.writer.close()

    async def _through(self, via: str, target: _Target) -> Stream:
        """A tunnel to the (checked) target through the upstream proxy `via` names."""
        proxy = self._upstreams.choose(via)
        return await connect_via(
            proxy, target.host, target.port, self._policy, self._timeouts.connect_s
        )

    async def _exchange(
        self, connection: _Connection, upstream: Stream, head: RequestHead, target: _Target
    ) -> None:
        """One plain-http request and its answer; the browser's connection closes after it."""
        client = connection.client
        exchange = Exchange(
            client=client,
            activity=connection.activity,
            upstream=upstream,
            head=head,
            origin_head=origin_head(head, absolute_target(head)),
            body_length=body_length(head),
            idle_s=self._timeouts.idle_s,
        )
        try:
            await exchange.run()
        except BadResponseError as exc:
            await self._send(client, replies.failed("connection", f"{target.label}: {exc}"))

    async def _refuse(self, client: Stream, target: str, reason: str) -> None:
        self.blocked_total += 1
        log.info("proxy.blocked", target=target, reason=reason)
        if self._on_blocked is not None:
            self._on_blocked(target, reason)
        await self._send(client, replies.blocked(target, reason))

    async def _send(self, client: Stream, data: bytes, *, close: bool = True) -> None:
        with contextlib.suppress(OSError, TimeoutError):
            client.writer.write(data)
            async with asyncio.timeout(self._timeouts.reply_s):
                await client.writer.drain()
        if close:
            client.writer.close()


def _warn_if_descriptors_short(capacity: int) -> None:
    """The cap guards the descriptor limit only if the limit holds the cap's descriptors."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = descriptors_needed(capacity)
    if soft != resource.RLIM_INFINITY and soft < needed:
        log.warning("proxy.descriptors_short", limit=soft, needed=needed, max_connections=capacity)


def _target_of(head: RequestHead, policy: UrlPolicy) -> _Target:
    """Host and port of the request, after the policy's checks that need no DNS."""
    if head.is_connect:
        host, port = split_authority(head.target)
        return _Target(host=host.removeprefix("[").removesuffix("]"), port=port, label=head.target)
    try:
        policy.check_url(head.target)
    except BlockedUrlError:
        if "://" not in head.target:
            raise BadRequestError("the request target must be an absolute URL") from None
        raise
    url = absolute_target(head)
    if url.scheme != "http":
        raise BadRequestError("only http:// is forwarded; https goes through CONNECT")
    body_length(head)  # a body the proxy cannot delimit is refused before connecting
    port = DEFAULT_PORTS[url.scheme] if url.port is None else url.port
    return _Target(host=url.hostname or "", port=port, label=head.target)
