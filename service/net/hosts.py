"""Host names read the way a browser reads them (the WHATWG URL standard's host parser).

A browser turns `http://0x7f.1/`, `http://2130706433/` and `http://%31%32%37.0.0.1/` into
127.0.0.1 without asking DNS; the policy must see the same address the browser will use.

Also the one host identity of a URL the rest of the service counts by: `host_key` (the page
scheduler's per-host limit, a deep crawl's pacing and `host` scope) and `site_of`, the
registrable domain (a deep crawl's `domain` scope).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

from publicsuffixlist import PublicSuffixList

if TYPE_CHECKING:
    from service.net.ip_ranges import IPAddress

_IPV4_PARTS: Final = 4
_BYTE: Final = 256
_BITS_PER_PART: Final = 8

_RADIX_PREFIXES: Final = (("0x", 16), ("0X", 16), ("0", 8))
"""Number prefixes of IPv4 parts, tried in order (`0x` means hexadecimal, `0` octal)."""

_MIN_PREFIXED: Final = 2
"""A prefix counts only in a part of at least two characters (a lone `0` is decimal)."""

_DIGITS: Final = {
    8: frozenset("01234567"),
    10: frozenset("0123456789"),
    16: frozenset("0123456789abcdefABCDEF"),
}

_FORBIDDEN_CODE_POINTS: Final = frozenset(
    [chr(code) for code in range(0x21)] + list("#%/:<>?@[\\]^|\x7f")
)
"""Characters that make a domain invalid after percent-decoding."""

_TRIMMED: Final = "".join(chr(code) for code in range(0x21))
"""C0 controls and space, which a browser strips from both ends of a URL."""

_REMOVED: Final = str.maketrans("", "", "\t\n\r")
"""Tab and newlines, which a browser removes from anywhere in a URL."""

_PATH_ENDS: Final = ("?", "#")

LOCALHOST: Final = "localhost"
"""Resolved to loopback by browsers themselves, with every subdomain."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    """A parsed host: its canonical spelling, and its address when it is an IP literal."""

    name: str
    """Dotted-decimal IPv4, compressed IPv6 without brackets, or a lower-case ASCII domain
    without trailing dot."""
    address: IPAddress | None = None

    @property
    def is_localhost(self) -> bool:
        return self.name == LOCALHOST or self.name.endswith("." + LOCALHOST)


def browser_cleaned_url(url: str) -> str:
    """`url` as an http(s) URL parser sees it: trimmed, without tabs and newlines, and with
    backslashes before the query read as slashes."""
    cleaned = url.strip(_TRIMMED).translate(_REMOVED)
    cut = min((i for i in map(cleaned.find, _PATH_ENDS) if i >= 0), default=len(cleaned))
    return cleaned[:cut].replace("\\", "/") + cleaned[cut:]


def parse_host(raw: str) -> Host:
    """The host as a browser reads `raw` (brackets optional around IPv6); ValueError if invalid."""
    if raw.startswith("[") and raw.endswith("]"):
        return _ipv6_host(raw[1:-1])
    if ":" in raw:
        return _ipv6_host(raw)
    domain = _ascii_domain(unquote(raw, errors="strict"))
    if _ends_in_number(domain):
        address = _parse_ipv4(domain)
        return Host(name=str(address), address=address)
    return Host(name=domain.removesuffix("."))


def _ipv6_host(raw: str) -> Host:
    if "%" in raw:
        raise ValueError(f"zone identifiers are not allowed in URLs: {raw!r}")
    address = IPv6Address(raw)
    return Host(name=str(address), address=address)


def _ascii_domain(domain: str) -> str:
    if not domain.isascii():
        domain = domain.encode("idna").decode("ascii")
    if not domain or any(char in _FORBIDDEN_CODE_POINTS for char in domain):
        raise ValueError(f"invalid host {domain!r}")
    return domain.lower()


def _ends_in_number(domain: str) -> bool:
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    last = parts[-1]
    if last and all(char in _DIGITS[10] for char in last):
        return True
    return _ipv4_number(last) is not None


def _parse_ipv4(domain: str) -> IPv4Address:
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    numbers = [_ipv4_number(part) for part in parts]
    values = [number for number in numbers if number is not None]
    if len(parts) > _IPV4_PARTS or len(values) < len(parts):
        raise ValueError(f"invalid IPv4 address {domain!r}")
    *leading, last = values
    if any(value >= _BYTE for value in leading) or last >= _BYTE ** (_IPV4_PARTS - len(leading)):
        raise ValueError(f"IPv4 address out of range {domain!r}")
    prefix = sum(
        value << (_BITS_PER_PART * (_IPV4_PARTS - 1 - index)) for index, value in enumerate(leading)
    )
    return IPv4Address(prefix + last)


def _ipv4_number(part: str) -> int | None:
    """One part of an IPv4 address: decimal, `0` + octal or `0x` + hex; None if not a number."""
    if not part:
        return None
    radix = 10
    for prefix, prefix_radix in _RADIX_PREFIXES:
        if len(part) >= _MIN_PREFIXED and part.startswith(prefix):
            part, radix = part[len(prefix) :], prefix_radix
            break
    if any(char not in _DIGITS[radix] for char in part):
        return None
    return int(part.lstrip("0") or "0", radix)


def host_key(url: str) -> str:
    """The host a URL counts as: its lower-case host name, without port or brackets (IPv6)."""
    return (urlsplit(url).hostname or "").lower()


def site_of(url: str) -> str:
    """The registrable domain of the URL's host by the Public Suffix List (`a.b.example.co.uk`
    -> `example.co.uk`, `me.github.io` stays itself); the host itself for IP addresses,
    `localhost` and its subdomains, and hosts that are a public suffix."""
    host = host_key(url)
    if _is_ip_address(host) or host == LOCALHOST or host.endswith("." + LOCALHOST):
        return host
    return _public_suffix_list().privatesuffix(host) or host


@cache
def _public_suffix_list() -> PublicSuffixList:
    """The list shipped with the `publicsuffixlist` package (ICANN and private sections)."""
    return PublicSuffixList()


def _is_ip_address(host: str) -> bool:
    try:
        ip_address(host)
    except ValueError:
        return False
    return True
