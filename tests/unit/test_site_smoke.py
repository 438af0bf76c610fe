"""The local test site serves what integration tests and benchmarks rely on."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest
from testsite import hit_counter, serve

HANG_UP = aiohttp.ClientTimeout(total=0.3)
"""A client deadline far shorter than the slow routes, so the client hangs up."""

DEADLINE_SECONDS = 5.0
"""Upper bound on any wait on a raw socket in these tests."""


@pytest.fixture
async def site():
    async with serve() as running:
        yield running


@pytest.fixture
async def client():
    async with aiohttp.ClientSession() as session:
        yield session


async def fetch(client, url):
    async with client.get(url) as response:
        return response.status, response.headers, await response.text()


async def test_pages_weigh_between_30_and_60_kb_and_carry_metadata(site, client):
    """Every /page/{n} is 30-60 KB of HTML with a title, a canonical link and ~20 links."""
    for n in range(25):
        status, _, body = await fetch(client, site.url(f"/page/{n}"))
        assert status == 200
        assert 30 * 1024 <= len(body.encode()) <= 60_000
        assert f"<title>Page {n}</title>" in body
        assert f'rel="canonical" href="{site.base_url}/page/{n}"' in body
        assert body.count("<a href=") == 20


async def test_pages_are_deterministic(site, client):
    """The same page number gives the same body twice."""
    first, second = [await fetch(client, site.url("/page/42")) for _ in range(2)]
    assert first[2] == second[2]


async def test_status_route_answers_the_requested_code(site, client):
    """/status/404 is a 404 with an HTML body."""
    status, _, body = await fetch(client, site.url("/status/404"))
    assert status == 404
    assert "<title>Status 404</title>" in body


async def test_multibyte_page_is_utf8_text_of_the_requested_size(site, client):
    """/multibyte?kb=100 is at least 100 KiB of UTF-8, mostly four-byte characters."""
    status, headers, body = await fetch(client, site.url("/multibyte?kb=100"))
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert 100 * 1024 <= len(body.encode()) < 110 * 1024
    assert body.count("😀") > body.count("é") > 1000


async def test_redirects_end_on_the_final_page(site, client):
    """/redirect and a three-hop chain both land on /page/1."""
    async with client.get(site.url("/redirect?to=/page/1")) as response:
        assert response.url.path == "/page/1"
        assert [r.status for r in response.history] == [302]
    async with client.get(site.url("/redirect/chain/3")) as response:
        assert response.url.path == "/page/1"
        assert len(response.history) == 3


async def test_self_navigating_pages_say_where_they_go(site, client):
    """/nav/redirect sends any scheme as given; /nav/meta-refresh declares its delay and
    target; /nav/long-title builds a title of the asked length."""
    target = "javascript:alert(1)"
    async with client.get(
        site.url("/nav/redirect/smoke"), params={"to": target}, allow_redirects=False
    ) as response:
        assert (response.status, response.headers["Location"]) == (302, target)
    _, _, body = await fetch(client, site.url("/nav/meta-refresh/smoke?delay_s=3&to=/page/2"))
    assert '<meta http-equiv="refresh" content="3; url=/page/2">' in body
    _, _, body = await fetch(client, site.url("/nav/long-title?chars=50"))
    title = body.split("<title>")[1].split("</title>")[0]
    assert len(title) == 50


async def test_flaky_fails_twice_with_retry_after_then_succeeds(site, client):
    """/flaky/{key} answers 503 with Retry-After twice, then 200; /reset starts over."""
    url = site.url("/flaky/a?fail=2&status=503&retry_after=1")
    answers = [await fetch(client, url) for _ in range(3)]
    assert [status for status, _, _ in answers] == [503, 503, 200]
    assert [headers.get("Retry-After") for _, headers, _ in answers[:2]] == ["1", "1"]
    await fetch(client, site.url("/reset"))
    assert (await fetch(client, url))[0] == 503


async def test_every_request_is_counted_per_path(site, client):
    """Hits count each request by path, unknown paths included."""
    for path in ("/page/3", "/page/3", "/no/such/path"):
        await fetch(client, site.url(path))
    assert site.hits["/page/3"] == 2
    assert site.hits["/no/such/path"] == 1


async def test_robots_disallows_private(site, client):
    """robots.txt disallows /private/ and the private page itself exists."""
    _, _, robots = await fetch(client, site.url("/robots.txt"))
    assert "Disallow: /private/" in robots
    assert (await fetch(client, site.url("/private/secret")))[0] == 200


async def test_huge_page_streams_a_complete_document(site, client):
    """/hostile/huge?mb=2 streams at least 2 MiB and ends the document."""
    _, _, body = await fetch(client, site.url("/hostile/huge?mb=2"))
    assert len(body) >= 2 * 1024 * 1024
    assert body.rstrip().endswith("</html>")


async def test_hanging_up_on_slow_routes_logs_no_error(client, caplog):
    """A client giving up on /slow or /hostile/trickle leaves no warning or error."""
    with caplog.at_level(logging.DEBUG):
        async with serve() as running:
            for path in ("/slow?ms=5000", "/hostile/trickle"):
                with pytest.raises(TimeoutError):
                    async with client.get(running.url(path), timeout=HANG_UP) as response:
                        await response.read()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_hit_counter_counts_every_connection(client):
    """An HTTP request and a connection speaking something else both count as hits."""
    async with hit_counter() as counter:
        assert (await fetch(client, counter.url + "/anything"))[0] == 200
        reader, writer = await asyncio.open_connection("127.0.0.1", counter.port)
        writer.write(b"not http at all\r\n\r\n")
        async with asyncio.timeout(DEADLINE_SECONDS):
            await reader.read()  # the counter answered and hung up: it has seen the connection
        writer.close()
        await writer.wait_closed()
    assert counter.hits == 2
