"""The dedupe form of a URL, and its fingerprint."""

from __future__ import annotations

import random

import pytest

from service.contracts import MAX_URL_LENGTH
from service.frontier import fingerprint, normalise


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM", "http://example.com/"),
        ("https://EXAMPLE.com/Path/Kept", "https://example.com/Path/Kept"),
        ("http://bücher.de/", "http://xn--bcher-kva.de/"),
        ("http://XN--BCHER-KVA.de/", "http://xn--bcher-kva.de/"),
        ("http://b%C3%BCcher.de/", "http://xn--bcher-kva.de/"),
        ("http://example.com./", "http://example.com/"),
        ("http://example.com../", "http://example.com/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://[0:0::1]/", "http://[::1]/"),
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
    ],
)
def test_scheme_and_host_take_one_spelling(url, expected):
    """Scheme and host are lower-cased; IDN hosts become punycode; IP literals are canonical."""
    assert normalise(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com:80/", "http://example.com/"),
        ("https://example.com:443/", "https://example.com/"),
        ("http://example.com:0080/", "http://example.com/"),
        ("http://example.com:/", "http://example.com/"),
        ("http://example.com:443/", "http://example.com:443/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("http://example.com:8080/", "http://example.com:8080/"),
    ],
)
def test_only_the_default_port_is_dropped(url, expected):
    """80 for http and 443 for https go; any other port stays."""
    assert normalise(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:pw@example.com/", "http://user:pw@example.com/"),
        ("http://us%65r:p%40ss@example.com/", "http://user:p%40ss@example.com/"),
        ("http://a@b@example.com/", "http://a%40b@example.com/"),
        ("http://@example.com/", "http://example.com/"),
    ],
)
def test_user_information_is_kept_with_its_escapes_normalised(url, expected):
    """Credentials change what is fetched, so they stay; an empty user information goes."""
    assert normalise(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com", "http://example.com/"),
        ("http://example.com?a=1", "http://example.com/?a=1"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a/b/..", "http://example.com/a/"),
        ("http://example.com/a/.", "http://example.com/a/"),
        ("http://example.com/../../a", "http://example.com/a"),
        ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
        ("http://example.com/a/..b/.c", "http://example.com/a/..b/.c"),
        ("http://example.com/a//b", "http://example.com/a//b"),
        ("http://example.com/a/", "http://example.com/a/"),
        ("http://example.com/a", "http://example.com/a"),
        ("http://example.com/a/index.html", "http://example.com/a/index.html"),
        ("http://example.com/a\\b?c\\d", "http://example.com/a/b?c%5Cd"),
    ],
)
def test_path_resolves_dot_segments_and_nothing_else(url, expected):
    """Dot segments go; trailing slashes and index pages stay as they are."""
    assert normalise(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h/%7euser/%41%2d%5F", "http://h/~user/A-_"),
        ("http://h/%2fa%2F?x=%2f", "http://h/%2Fa%2F?x=%2F"),
        ("http://h/a b?q=a b", "http://h/a%20b?q=a%20b"),
        ("http://h/ü?q=€", "http://h/%C3%BC?q=%E2%82%AC"),
        ("http://h/%e2%82%ac", "http://h/%E2%82%AC"),
        ("http://h/%", "http://h/%25"),
        ("http://h/%zz%2", "http://h/%25zz%252"),
        ("http://h/%25", "http://h/%25"),
        ('http://h/[x]{y}|^`"<>', "http://h/%5Bx%5D%7By%7D%7C%5E%60%22%3C%3E"),
        ("http://h/a:b@c!$&'()*+,;=", "http://h/a:b@c!$&'()*+,;="),
        ("http://h/?a=1+2&b=/?:@", "http://h/?a=1+2&b=/?:@"),
        ("http://h/?a[]=1", "http://h/?a%5B%5D=1"),
    ],
)
def test_percent_encoding_is_normalised(url, expected):
    """Unreserved escapes decoded, others upper-case, disallowed characters escaped as UTF-8."""
    assert normalise(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h/a?b=2&a=1", "http://h/a?b=2&a=1"),
        ("http://h/a?a=1&a=1", "http://h/a?a=1&a=1"),
        ("http://h/a?", "http://h/a"),
        ("http://h/a?#x", "http://h/a"),
        ("http://h/a#frag", "http://h/a"),
        ("http://h/a?q=1#frag?x", "http://h/a?q=1"),
    ],
)
def test_query_is_kept_in_order_and_fragment_dropped(url, expected):
    """Parameters keep their order and duplicates; an empty query and the fragment go."""
    assert normalise(url) == expected


def test_reordered_queries_stay_distinct():
    """`?b=2&a=1` and `?a=1&b=2` may be different pages, so they are different URLs."""
    assert normalise("http://h/?b=2&a=1") != normalise("http://h/?a=1&b=2")


def test_ignore_query_drops_the_whole_query():
    """With `ignore_query`, every query of a path normalises to the bare path."""
    urls = ["http://h/a?b=2&a=1", "http://h/a?", "http://h/a#x", "http://h/a?z"]
    assert {normalise(url, ignore_query=True) for url in urls} == {"http://h/a"}


def test_a_browser_ignores_whitespace_around_and_tabs_inside():
    """Spaces and controls around the URL, and tabs and newlines inside it, are not part of it."""
    assert normalise("  http://h/a\tb\n ") == "http://h/ab"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/",
        "mailto:someone@example.com",
        "javascript:alert(1)",
        "/relative/path",
        "//example.com/no-scheme",
        "http:///no-host",
        "http://:80/",
        "http://.../",
        "http://example.com:99999/",
        "http://example.com:port/",
        "http://ex ample.com/",
        "http://[fe80::1%25eth0]/",
        "http://[v1.fe]/",
        "http://[::1/",
        "http://h/\ud800",
        "",
    ],
)
def test_what_is_not_an_http_url_with_a_host_is_none(url):
    """Other schemes, relative references and broken hosts or ports have no dedupe form."""
    assert normalise(url) is None


def test_a_url_over_the_length_limit_is_none():
    """The limit holds for the URL given and for its normalised form."""
    prefix = "http://h/"
    assert normalise(prefix + "a" * (MAX_URL_LENGTH - len(prefix))) is not None
    assert normalise(prefix + "a" * (MAX_URL_LENGTH - len(prefix) + 1)) is None
    assert normalise(prefix + "ü" * (MAX_URL_LENGTH // 2)) is None
    assert normalise(prefix + "a#" + "f" * MAX_URL_LENGTH) is None


_PIECES = {
    "scheme": ["http", "https", "HTTP", "hTTps", "ftp", ""],
    "userinfo": ["", "", "", "user@", "u:p@", "@", "a@b@", "%75%3a@", "ü@"],
    "host": [
        "example.com",
        "Example.COM",
        "example.com.",
        "bücher.de",
        "XN--BCHER-KVA.DE",
        "0x7f.1",
        "127.0.0.1",
        "[::1]",
        "[0:0:0::1]",
        "a..b",
        "%61.com",
        "",
    ],
    "port": ["", "", ":80", ":443", ":8080", ":0080", ":", ":x"],
    "segment": [
        "",
        "a",
        "B",
        ".",
        "..",
        "%2e",
        "%2E%2e",
        "%7e",
        "%7E",
        "%2f",
        "%",
        "%4",
        "%zz",
        "%25",
        " ",
        "ü",
        "€",
        "index.html",
        "a b",
        "\\",
        "[",
        "]",
        "{}",
        "|",
        "'",
        ":",
        "@",
        "+",
        "\t",
        "?",
        "#",
        "&",
        "=",
    ],
}


def _generated_url(rng: random.Random) -> str:
    def pick(kind: str) -> str:
        return rng.choice(_PIECES[kind])

    path = "".join("/" + pick("segment") + pick("segment") for _ in range(rng.randrange(5)))
    query = "&".join(pick("segment") + "=" + pick("segment") for _ in range(rng.randrange(3)))
    url = f"{pick('scheme')}://{pick('userinfo')}{pick('host')}{pick('port')}{path}"
    if rng.random() < 0.5:
        url += "?" + query
    if rng.random() < 0.3:
        url += "#" + pick("segment")
    return url


def test_normalising_twice_changes_nothing():
    """normalise(normalise(u)) == normalise(u) over thousands of generated awkward URLs."""
    rng = random.Random(11)
    normalised_count = 0
    for _ in range(20_000):
        url = _generated_url(rng)
        for ignore_query in (False, True):
            once = normalise(url, ignore_query=ignore_query)
            if once is not None:
                normalised_count += 1
                assert normalise(once, ignore_query=ignore_query) == once, url
                assert normalise(once) == once, url
    assert normalised_count > 10_000  # the generator mostly yields URLs that normalise


def test_fingerprint_is_a_stable_non_zero_64_bit_int():
    """The same URL always gives the same 64-bit value; different URLs differ."""
    first = fingerprint("http://example.com/")
    assert first == fingerprint("http://example.com/")
    assert 0 < first < 2**64
    values = {fingerprint(f"http://example.com/{index}") for index in range(10_000)}
    assert len(values) == 10_000
    assert all(0 < value < 2**64 for value in values)
