"""The SSRF policy: which URLs, addresses and ports the crawler may reach.

Only http and https; no loopback, private, link-local, multicast or otherwise non-public
address (numeric host spellings and IPv6 forms of IPv4 addresses included) and no port but
the egress ports (80 and 443 unless configured), unless the allowlist opens the target:
`host:port` opens that port of that host, a bare `host` every port of it. `check_url` judges
a URL without DNS; `resolve_and_check` resolves a host once and returns the addresses it
checked, which are the ones to connect to.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from ipaddress import ip_address
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from service.contracts import ALLOWED_SCHEMES
from service.errors import ConfigurationError, PermanentError
from service.net.hosts import Host, browser_cleaned_url, parse_host
from service.net.ip_ranges import IPAddress, forbidden_reason

if TYPE_CHECKING:
    from collections.abc import Iterable

    from service.settings import Settings

__all__ = [
    "BlockedUrlError",
    "IPAddress",
    "UnresolvableHostError",
    "UrlPolicy",
    "forbidden_reason",
]

RESOLVE_DEADLINE_S: Final = 10.0
"""Longest wait for DNS (the system resolver's own retries included)."""

DEFAULT_PORTS: Final = {"http": 80, "https": 443}

DEFAULT_EGRESS_PORTS: Final = frozenset(DEFAULT_PORTS.values())
"""Ports any public host may be reached on: the web's own."""

_MAX_PORT: Final = 65535


class BlockedUrlError(PermanentError):
    """The policy forbids the URL (scheme, unparsable URL, non-public address)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url} is blocked: {reason}")
        self.url = url
        self.reason = reason


class UnresolvableHostError(PermanentError):
    """The host name did not resolve (the contract's error code `dns`)."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"{host} did not resolve: {reason}")
        self.host = host
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class UrlPolicy:
    """The policy of one worker, built from its settings."""

    allowed: frozenset[tuple[str, int | None]] = frozenset()
    """Allowlisted (host, port) pairs; port None allows every port of the host."""
    block_private_addresses: bool = True
    egress_ports: frozenset[int] = DEFAULT_EGRESS_PORTS
    """Ports every host may be reached on; others only through the allowlist."""
    resolve_deadline_s: float = RESOLVE_DEADLINE_S

    @classmethod
    def from_settings(cls, settings: Settings) -> UrlPolicy:
        return cls.create(
            allowed_hosts=settings.allowed_hosts,
            block_private_addresses=settings.block_private_addresses,
            egress_ports=settings.egress_ports,
        )

    @classmethod
    def create(
        cls,
        *,
        allowed_hosts: Iterable[str] = (),
        block_private_addresses: bool = True,
        egress_ports: Iterable[int] = DEFAULT_EGRESS_PORTS,
        resolve_deadline_s: float = RESOLVE_DEADLINE_S,
    ) -> UrlPolicy:
        """A policy from `host[:port]` allowlist entries (`[v6]:port` for IPv6 with a port)."""
        return cls(
            allowed=frozenset(_allow_entry(entry) for entry in allowed_hosts),
            block_private_addresses=block_private_addresses,
            egress_ports=frozenset(egress_ports),
            resolve_deadline_s=resolve_deadline_s,
        )

    def check_url(self, url: str) -> None:
        """Raise BlockedUrlError unless `url` is http(s) with a host that may be reached.

        Judges IP literals (in every spelling a browser accepts) and `localhost` names without
        DNS; other names are judged by `resolve_and_check`.
        """
        host, port = _host_and_port(url)
        reason = self._reason_without_dns(host, port)
        if reason is not None:
            raise BlockedUrlError(url, reason)

    async def resolve_and_check(self, host: str, port: int) -> list[IPAddress]:
        """The addresses of `host`, resolved once; connect to these and no others.

        Raises BlockedUrlError when any address is forbidden (unless `host[:port]` is
        allowlisted) and UnresolvableHostError when DNS fails or takes too long.
        """
        return await self._resolve_checked(_parsed_host(host, f"{host}:{port}"), port)

    async def check_target(self, url: str) -> list[IPAddress]:
        """`check_url` and `resolve_and_check` in one, on the URL parsed once as a browser
        would parse it: the addresses the page's first request may connect to."""
        host, port = _host_and_port(url)
        return await self._resolve_checked(host, port)

    async def _resolve_checked(self, parsed: Host, port: int) -> list[IPAddress]:
        target = f"{parsed.name}:{port}"
        reason = self._reason_without_dns(parsed, port)
        if reason is not None:
            raise BlockedUrlError(target, reason)
        if parsed.address is not None:
            return [parsed.address]
        addresses = await self._resolve(parsed.name, port)
        if self._checks(parsed, port):
            for address in addresses:
                reason = forbidden_reason(address)
                if reason is not None:
                    raise BlockedUrlError(target, f"resolves to {address}, {reason}")
        return addresses

    def is_allowed(self, host: Host, port: int) -> bool:
        return (host.name, port) in self.allowed or (host.name, None) in self.allowed

    def port_reason(self, host: Host, port: int) -> str | None:
        """Why `port` of `host` may not be reached; None when it is an egress port or the
        allowlist opens it."""
        if port in self.egress_ports or self.is_allowed(host, port):
            return None
        return f"port {port} is not an egress port"

    def _checks(self, host: Host, port: int) -> bool:
        return self.block_private_addresses and not self.is_allowed(host, port)

    def _reason_without_dns(self, host: Host, port: int) -> str | None:
        """The address verdict for literals and localhost names first, then the port's."""
        if self._checks(host, port):
            if host.address is not None:
                reason = forbidden_reason(host.address)
                if reason is not None:
                    return reason
            elif host.is_localhost:
                return "loopback (localhost name)"
        return self.port_reason(host, port)

    async def _resolve(self, name: str, port: int) -> list[IPAddress]:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.resolve_deadline_s):
                infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except TimeoutError as exc:
            raise UnresolvableHostError(name, "DNS timed out") from exc
        except (OSError, UnicodeError) as exc:
            raise UnresolvableHostError(name, str(exc) or type(exc).__name__) from exc
        addresses = _unique(ip_address(info[4][0]) for info in infos)
        if not addresses:
            raise UnresolvableHostError(name, "no addresses")
        return addresses


def _host_and_port(url: str) -> tuple[Host, int]:
    """Host and port of an http(s) URL, as a browser parses it."""
    cleaned = browser_cleaned_url(url)
    try:
        parts = urlsplit(cleaned)
        hostname, port = parts.hostname, parts.port
    except ValueError as exc:
        raise BlockedUrlError(url, f"invalid URL ({exc})") from exc
    if parts.scheme not in ALLOWED_SCHEMES:
        raise BlockedUrlError(url, f"scheme {parts.scheme or '(none)'!r} is not http(s)")
    if not hostname:
        raise BlockedUrlError(url, "no host")
    return _parsed_host(hostname, url), DEFAULT_PORTS[parts.scheme] if port is None else port


def _parsed_host(raw: str, target: str) -> Host:
    try:
        return parse_host(raw)
    except (ValueError, UnicodeError) as exc:
        raise BlockedUrlError(target, f"invalid host ({exc})") from exc


def _allow_entry(entry: str) -> tuple[str, int | None]:
    """`host`, `host:port`, `v6`, `[v6]` or `[v6]:port` as a (canonical host, port) pair."""
    raw_host, port = _split_entry(entry.strip())
    try:
        return parse_host(raw_host).name, port
    except (ValueError, UnicodeError) as exc:
        raise ConfigurationError(f"invalid allowed host {entry!r}: {exc}") from exc


def _split_entry(entry: str) -> tuple[str, int | None]:
    if entry.startswith("[") and "]:" in entry:
        host, _, port = entry.rpartition(":")
    elif entry.count(":") == 1:
        host, _, port = entry.partition(":")
    else:
        return entry, None
    if not (port.isascii() and port.isdecimal()) or not 0 < int(port) <= _MAX_PORT:
        raise ConfigurationError(f"invalid port in allowed host {entry!r}")
    return host, int(port)


def _unique(addresses: Iterable[IPAddress]) -> list[IPAddress]:
    return list(dict.fromkeys(addresses))
