"""A site's answer head as the proxy passes it on: read leniently, written strictly."""

from __future__ import annotations

import pytest

from service.egress.response import (
    BadResponseError,
    Framing,
    browser_head,
    chunk_size,
    framing,
    parse_response_head,
)


def _head(*lines: str):
    return parse_response_head([line.encode("latin-1") for line in lines])


def test_the_browser_gets_no_verdict_or_hop_by_hop_header_and_connection_close():
    head = _head(
        "HTTP/1.1 200 OK",
        "Content-Type: text/html",
        "x-crawlstream-blocked: loopback",
        "X-Crawlstream-Error : dns",
        "Connection: keep-alive, X-Secret",
        "X-Secret: 1",
        "Keep-Alive: timeout=5",
        "no colon here",
    )
    written = browser_head(head).decode()
    assert written == "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n"


def test_a_folded_line_continues_the_header_before_it():
    head = _head("HTTP/1.1 200 OK", "X-Long: a", "\tb", " X-Crawlstream-Blocked: x")
    assert head.headers == (("X-Long", "a b X-Crawlstream-Blocked: x"),)


def test_an_upgrade_keeps_its_upgrade_header():
    head = _head("HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade")
    assert head.switching
    assert not head.interim
    assert browser_head(head, upgrade=True).endswith(
        b"Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("lines", "method", "kind", "length"),
    [
        (("HTTP/1.1 200 OK", "Content-Length: 12"), "GET", Framing.LENGTH, 12),
        (("HTTP/1.1 200 OK", "Content-Length: 3, 3"), "GET", Framing.LENGTH, 3),
        (
            ("HTTP/1.1 200 OK", "Transfer-Encoding: gzip, chunked", "Content-Length: 9"),
            "GET",
            Framing.CHUNKED,
            0,
        ),
        (("HTTP/1.1 200 OK", "Transfer-Encoding: gzip"), "GET", Framing.CLOSE, 0),
        (("HTTP/1.0 200 OK",), "GET", Framing.CLOSE, 0),
        (("HTTP/1.1 200 OK", "Content-Length: 12"), "HEAD", Framing.NONE, 0),
        (("HTTP/1.1 304 Not Modified", "Content-Length: 12"), "GET", Framing.NONE, 0),
        (("HTTP/1.1 204 No Content",), "GET", Framing.NONE, 0),
    ],
)
def test_the_body_ends_where_the_head_says(lines, method, kind, length):
    body = framing(_head(*lines), method=method)
    assert (body.kind, body.length) == (kind, length)


@pytest.mark.parametrize(
    "lines",
    [
        ("HTTP/1.1 200 OK", "Content-Length: 1", "Content-Length: 2"),
        ("HTTP/1.1 200 OK", "Content-Length: -1"),
        ("HTTP/1.1 200 OK", "Content-Length: 0x10"),
    ],
)
def test_an_ambiguous_length_is_refused(lines):
    with pytest.raises(BadResponseError):
        framing(_head(*lines), method="GET")


@pytest.mark.parametrize("line", ["HTTP/2 200", "ICY 200 OK", "HTTP/1.1 20", "HTTP/1.1 abc OK", ""])
def test_a_status_line_that_is_not_http_1_is_refused(line):
    with pytest.raises(BadResponseError):
        _head(line)


def test_chunk_sizes_are_hex_with_extensions_ignored():
    assert chunk_size(b"1a;name=value") == 26
    assert chunk_size(b"0") == 0
    for bad in (b"", b"-1", b"zz", b"1" * 17):
        with pytest.raises(BadResponseError):
            chunk_size(bad)
