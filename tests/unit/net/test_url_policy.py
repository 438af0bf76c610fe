from __future__ import annotations

from ipaddress import ip_address

import pytest

from service.errors import ConfigurationError, PermanentError
from service.net.policy import (
    BlockedUrlError,
    UnresolvableHostError,
    UrlPolicy,
    forbidden_reason,
)
from service.settings import load_settings

POLICY = UrlPolicy.create()


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("169.254.0.1", "link-local"),
        ("100.64.0.1", "shared address space (carrier-grade NAT)"),
        ("100.127.255.255", "shared address space (carrier-grade NAT)"),
        ("0.0.0.0", "unspecified"),  # noqa: S104  # an address under test, not a bind
        ("0.1.2.3", "reserved (this network)"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("192.0.2.1", "documentation"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.255", "benchmarking"),
        ("192.0.0.8", "reserved (IETF protocol assignments)"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fc00::1", "private (unique local)"),
        ("fd12:3456::1", "private (unique local)"),
        ("fe80::1", "link-local"),
        ("febf::1", "link-local"),
        ("fec0::1", "private (site-local)"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("2001::1", "reserved (IETF protocol assignments)"),
        ("100::1", "reserved (discard-only)"),
        ("4000::1", "reserved"),
        ("64:ff9b:1::1", "private (local-use NAT64)"),
        ("::ffff:127.0.0.1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
        ("::ffff:169.254.169.254", "link-local (IPv4 169.254.169.254 inside IPv6)"),
        ("::ffff:10.0.0.1", "private (IPv4 10.0.0.1 inside IPv6)"),
        ("::127.0.0.1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
        ("::0.0.0.2", "reserved (this network) (IPv4 0.0.0.2 inside IPv6)"),
        ("64:ff9b::7f00:1", "loopback (IPv4 127.0.0.1 inside IPv6)"),
        ("64:ff9b::a9fe:a9fe", "link-local (IPv4 169.254.169.254 inside IPv6)"),
        ("2002:7f00:1::", "loopback (IPv4 127.0.0.1 inside IPv6)"),
        ("2002:c0a8:101::1", "private (IPv4 192.168.1.1 inside IPv6)"),
    ],
)
def test_forbidden_addresses_have_a_reason(address, reason):
    assert forbidden_reason(ip_address(address)) == reason


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "198.17.255.255",
        "198.20.0.0",
        "2606:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ],
)
def test_public_addresses_are_allowed(address):
    assert forbidden_reason(ip_address(address)) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0x7F.0.0.1/",
        "http://0177.0.0.1/",
        "http://0177.1/",
        "http://127.1/",
        "http://127.0.1/",
        "http://0x7f000001/",
        "http://017700000001/",
        "http://00000000000000000000177.0.0.1/",
        "http://127.0.0.1./",
        "http://%31%32%37.0.0.1/",
        "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/",
        "http://0/",
        "http://0x/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[0:0:0:0:0:ffff:127.0.0.1]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://2852039166/",
        "http://0xa9fea9fe/",
        "http://0251.0376.0251.0376/",
        "http://10.0.0.1:8080/",
        "http://192.168.0.1/",
        "http://localhost/",
        "http://LOCALHOST./",
        "http://app.localhost/",
        "http://user:pass@127.0.0.1/",
        "http://evil.example@127.0.0.1/",
        "http://127.0.0.1\\@evil.example/",
        "  http://127.0.0.1/  ",
        "http://12\t7.0.0.1/",
        "HTTP://127.0.0.1/",
    ],
)
def test_numeric_and_named_loopback_or_private_urls_are_blocked_without_dns(url):
    """Every spelling a browser reads as a non-public address is recognised without DNS."""
    with pytest.raises(BlockedUrlError):
        POLICY.check_url(url)


@pytest.mark.parametrize(
    ("url", "reason_part"),
    [
        ("file:///etc/passwd", "'file'"),
        ("ftp://example.com/", "'ftp'"),
        ("data:text/html,hi", "'data'"),
        ("javascript:alert(1)", "'javascript'"),
        ("chrome://settings", "'chrome'"),
        ("about:blank", "'about'"),
        ("ws://example.com/", "'ws'"),
        ("wss://example.com/", "'wss'"),
        ("blob:https://example.com/uuid", "'blob'"),
        ("view-source:https://example.com/", "'view-source'"),
        ("example.com/no-scheme", "'(none)'"),
        ("http:///no-host", "no host"),
        ("http://[::1/", "invalid URL"),
        ("http://example.com:99999/", "invalid URL"),
        ("http://1.2.3.4.5/", "invalid host"),
        ("http://256.0.0.1/", "invalid host"),
        ("http://4294967296/", "invalid host"),
        ("http://09/", "invalid host"),
        ("http://[fe80::1%25eth0]/", "invalid host"),
        ("http://exa%00mple.com/", "invalid host"),
        ("http://exa mple.com/", "invalid host"),
    ],
)
def test_other_schemes_and_broken_urls_are_blocked(url, reason_part):
    with pytest.raises(BlockedUrlError) as caught:
        POLICY.check_url(url)
    assert reason_part in caught.value.reason
    assert caught.value.url == url
    assert isinstance(caught.value, PermanentError)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/",
        "https://example.com/path?q=1#frag",
        "https://93.184.216.34/",
        "http://[2606:4700::1111]/",
        "https://xn--bcher-kva.example/",
        "https://b\u00fccher.example/",
        "http://localhost.example.com/",
        "http://127.0.0.1.example.com/",
    ],
)
def test_public_http_urls_pass(url):
    POLICY.check_url(url)


@pytest.mark.parametrize(
    ("entries", "url", "allowed"),
    [
        (["127.0.0.1:8080"], "http://127.0.0.1:8080/", True),
        (["127.0.0.1:8080"], "http://127.0.0.1:8081/", False),
        (["127.0.0.1:8080"], "http://2130706433:8080/", True),
        (["127.0.0.1"], "http://127.0.0.1:9999/", True),
        (["127.0.0.1"], "http://127.0.0.2/", False),
        (["0x7f.1:80"], "http://127.0.0.1/", True),
        (["localhost"], "http://localhost:1234/", True),
        (["localhost:80"], "http://localhost:81/", False),
        (["[::1]:8080"], "http://[::1]:8080/", True),
        (["[::1]:8080"], "http://[::1]:8081/", False),
        (["::1"], "http://[::1]:8081/", True),
        (["[::1]"], "http://[::1]/", True),
        (["169.254.169.254"], "http://169.254.169.254/latest/", True),
        (["10.0.0.5:443"], "https://10.0.0.5/", True),
        (["10.0.0.5:443"], "http://10.0.0.5/", False),
    ],
)
def test_allowlist_with_and_without_port(entries, url, allowed):
    policy = UrlPolicy.create(allowed_hosts=entries)
    if allowed:
        policy.check_url(url)
    else:
        with pytest.raises(BlockedUrlError):
            policy.check_url(url)


def test_the_block_can_be_switched_off_but_not_the_scheme_check():
    policy = UrlPolicy.create(block_private_addresses=False)
    policy.check_url("http://127.0.0.1/")
    with pytest.raises(BlockedUrlError):
        policy.check_url("file:///etc/passwd")


def test_from_settings_reads_allowlist_and_switch():
    settings = load_settings(
        allowed_hosts="127.0.0.1:8080, LocalHost", block_private_addresses=True
    )
    policy = UrlPolicy.from_settings(settings)
    assert policy.allowed == frozenset({("127.0.0.1", 8080), ("localhost", None)})
    assert policy.block_private_addresses


@pytest.mark.parametrize("entry", ["127.0.0.1:0", "127.0.0.1:70000", "host:port", "1.2.3.4.5"])
def test_a_bad_allowlist_entry_is_a_configuration_error(entry):
    with pytest.raises(ConfigurationError):
        UrlPolicy.create(allowed_hosts=[entry])


async def test_resolve_returns_the_literal_address_without_dns():
    addresses = await POLICY.resolve_and_check("93.184.216.34", 443)
    assert [str(address) for address in addresses] == ["93.184.216.34"]


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "2130706433", "0x7f.1", "::ffff:127.0.0.1", "[::1]", "169.254.169.254"]
)
async def test_resolve_blocks_forbidden_literals(host):
    with pytest.raises(BlockedUrlError):
        await POLICY.resolve_and_check(host, 80)


async def test_localhost_is_blocked_by_name_before_dns():
    with pytest.raises(BlockedUrlError) as caught:
        await POLICY.resolve_and_check("sub.localhost", 80)
    assert "localhost" in caught.value.reason


async def test_a_name_resolving_to_loopback_is_blocked():
    """`localhost.` is only one spelling; any name whose address is loopback is refused."""
    policy = UrlPolicy.create(allowed_hosts=["localhost:1"])
    with pytest.raises(BlockedUrlError) as caught:
        await policy.resolve_and_check("localhost", 2)
    assert "loopback" in caught.value.reason


async def test_an_allowlisted_name_resolves_to_its_addresses():
    policy = UrlPolicy.create(allowed_hosts=["localhost:8080"])
    addresses = await policy.resolve_and_check("localhost", 8080)
    assert addresses
    assert all(address.is_loopback for address in addresses)


async def test_an_unresolvable_host_is_a_distinct_permanent_error():
    with pytest.raises(UnresolvableHostError) as caught:
        await POLICY.resolve_and_check("nonexistent.invalid", 80)
    assert isinstance(caught.value, PermanentError)
    assert not isinstance(caught.value, BlockedUrlError)


@pytest.mark.parametrize(
    "url",
    ["http://0x7f.1:8080/", "http://127.0.0.1\\@example.com/", "ftp://example.com/", "http:///x"],
)
async def test_check_target_parses_like_a_browser_and_blocks(url):
    """`check_target` judges the host and port a browser would use, before any DNS."""
    with pytest.raises(BlockedUrlError):
        await POLICY.check_target(url)


async def test_check_target_returns_the_addresses_of_an_allowlisted_target():
    """An allowlisted literal target passes and yields the address to connect to."""
    policy = UrlPolicy.create(allowed_hosts=["127.0.0.1:8080"])
    assert [str(a) for a in await policy.check_target("http://0x7f.1:8080/x")] == ["127.0.0.1"]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://example.com/", True),
        ("https://example.com/", True),
        ("http://example.com:443/", True),
        ("https://93.184.216.34:80/", True),
        ("http://example.com:25/", False),
        ("https://example.com:8443/", False),
        ("http://93.184.216.34:22/", False),
        ("http://[2606:4700::1111]:6379/", False),
    ],
)
def test_only_the_egress_ports_are_open_by_default(url, allowed):
    """Ports 80 and 443 of any public host; every other port is blocked before any DNS."""
    if allowed:
        POLICY.check_url(url)
    else:
        with pytest.raises(BlockedUrlError) as caught:
            POLICY.check_url(url)
        assert "is not an egress port" in caught.value.reason


@pytest.mark.parametrize(
    ("entries", "url", "allowed"),
    [
        (["example.com:8443"], "https://example.com:8443/", True),
        (["example.com:8443"], "https://example.com:8444/", False),
        (["example.com:8443"], "https://other.example:8443/", False),
        (["example.com"], "http://example.com:25/", True),
        (["93.184.216.34:25"], "http://93.184.216.34:25/", True),
        (["93.184.216.34:25"], "http://0x5db8d822:25/", True),
    ],
)
def test_the_allowlist_opens_ports_for_its_own_host_only(entries, url, allowed):
    """`host:port` opens that port of that host (any spelling of it); a bare `host` opens
    every port of it; no entry opens a port of another host."""
    policy = UrlPolicy.create(allowed_hosts=entries)
    if allowed:
        policy.check_url(url)
    else:
        with pytest.raises(BlockedUrlError):
            policy.check_url(url)


def test_the_egress_ports_replace_the_default():
    policy = UrlPolicy.create(egress_ports=[8080])
    policy.check_url("http://example.com:8080/")
    with pytest.raises(BlockedUrlError):
        policy.check_url("http://example.com/")


async def test_a_forbidden_port_is_refused_before_dns():
    """A name on a closed port is refused without resolving it (no DNS for a target that
    could never be reached)."""
    with pytest.raises(BlockedUrlError) as caught:
        await POLICY.resolve_and_check("nonexistent.invalid", 25)
    assert caught.value.reason == "port 25 is not an egress port"


async def test_an_address_verdict_comes_before_the_port_verdict():
    with pytest.raises(BlockedUrlError) as caught:
        await POLICY.resolve_and_check("127.0.0.1", 25)
    assert caught.value.reason == "loopback"


def test_from_settings_reads_the_egress_ports():
    policy = UrlPolicy.from_settings(load_settings(egress_ports="80,8080"))
    assert policy.egress_ports == frozenset({80, 8080})
