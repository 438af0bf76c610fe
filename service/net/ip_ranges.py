"""Which IP addresses a crawler must never connect to, and why.

Tables follow the IANA special-purpose address registries; an IPv6 address that embeds an
IPv4 address (mapped, compatible, 6to4, NAT64) is judged by the IPv4 address it reaches.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Final, TypeAlias

IPAddress: TypeAlias = IPv4Address | IPv6Address
"""An address of either family, as `ipaddress.ip_address` returns it."""

_V4_RANGES: Final = tuple(
    (IPv4Network(network), reason)
    for network, reason in (
        ("0.0.0.0/8", "reserved (this network)"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared address space (carrier-grade NAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved (6to4 relay anycast)"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
    )
)
"""IPv4 networks that are not public unicast."""

_V6_RANGES: Final = tuple(
    (IPv6Network(network), reason)
    for network, reason in (
        ("64:ff9b:1::/48", "private (local-use NAT64)"),
        ("100::/64", "reserved (discard-only)"),
        ("2001::/23", "reserved (IETF protocol assignments)"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "reserved (segment routing)"),
        ("fc00::/7", "private (unique local)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "private (site-local)"),
        ("ff00::/8", "multicast"),
    )
)
"""IPv6 networks that are not public unicast."""

_GLOBAL_UNICAST: Final = IPv6Network("2000::/3")
"""IPv6 space outside this block is not assigned for public unicast."""

_V4_COMPATIBLE: Final = IPv6Network("::/96")
_NAT64: Final = IPv6Network("64:ff9b::/96")
_V4_BROADCAST: Final = IPv4Address("255.255.255.255")
_LOW_32_BITS: Final = 0xFFFFFFFF


def forbidden_reason(address: IPAddress) -> str | None:
    """Why the crawler must not connect to `address`; None for a public unicast address."""
    if isinstance(address, IPv4Address):
        return _v4_reason(address)
    embedded = embedded_ipv4(address)
    if embedded is not None and not address.is_loopback and not address.is_unspecified:
        reason = _v4_reason(embedded)
        return f"{reason} (IPv4 {embedded} inside IPv6)" if reason else None
    return _v6_reason(address)


def embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address reaches through a transition mechanism, if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _V4_COMPATIBLE or address in _NAT64:
        return IPv4Address(int(address) & _LOW_32_BITS)
    return None


def _v4_reason(address: IPv4Address) -> str | None:
    if address.is_unspecified:
        return "unspecified"
    if address == _V4_BROADCAST:
        return "broadcast"
    return next((reason for network, reason in _V4_RANGES if address in network), None)


def _v6_reason(address: IPv6Address) -> str | None:
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    reason = next((reason for network, reason in _V6_RANGES if address in network), None)
    if reason is None and address not in _GLOBAL_UNICAST:
        return "reserved"
    return reason
