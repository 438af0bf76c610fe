"""robots.txt rules: parsing, what each answer means, and one load per origin per TTL."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from inmemory import ROBOTS, FakeRobotsSource
from waiting import until

from service.egress.proxy import EgressProxy, ProxyAccess, ProxyKeys
from service.http.robots import (
    FAILURE_TTL_S,
    ROBOTS_TTL_S,
    HttpRobotsSource,
    Origin,
    RobotsCache,
    RobotsFile,
)
from service.net.policy import UrlPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_rules_for_the_crawlstream_token_apply():
    """The `crawlstream` group applies to us (not the `*` group); the first matching line wins."""
    cache = RobotsCache(FakeRobotsSource())
    assert await cache.allowed("http://a.test/page/1")
    assert not await cache.allowed("http://a.test/no-crawlstream/x")
    assert await cache.allowed("http://a.test/no-crawlstream/except")
    assert await cache.allowed("http://a.test/private/x")  # only `*` disallows it


async def test_wildcard_group_applies_when_no_group_names_us():
    """`User-agent: *` rules apply to a crawler with no group of its own."""
    source = FakeRobotsSource(
        {"http://a.test/robots.txt": RobotsFile(status=200, text=ROBOTS[:40])}
    )
    cache = RobotsCache(source)
    assert not await cache.allowed("http://a.test/private/x")
    assert await cache.allowed("http://a.test/page/1")


@pytest.mark.parametrize("status", [404, 403, 410, 500, 503, None])
async def test_error_answers_allow_everything(status):
    """4xx (no file), 5xx and no answer at all count as allow-all."""
    source = FakeRobotsSource(
        {"http://a.test/robots.txt": RobotsFile(status=status, text="User-agent: *\nDisallow: /")}
    )
    assert await RobotsCache(source).allowed("http://a.test/private/x")


async def test_one_fetch_per_origin_and_the_origin_includes_scheme_and_port():
    """Pages of one origin share one fetch; another port or scheme is another origin."""
    source = FakeRobotsSource()
    cache = RobotsCache(source)
    for url in ("http://A.test/1", "http://a.test:80/2", "http://a.test/private/3"):
        await cache.allowed(url)
    await cache.allowed("http://a.test:8080/1")
    await cache.allowed("https://a.test/1")
    assert source.fetched == [
        "http://a.test/robots.txt",
        "http://a.test:8080/robots.txt",
        "https://a.test/robots.txt",
    ]


async def test_concurrent_pages_wait_for_one_load():
    """Many pages asking at once cause one fetch, and all get the answer."""
    source = FakeRobotsSource()
    source.gate.clear()
    cache = RobotsCache(source)
    asks = [asyncio.create_task(cache.allowed(f"http://a.test/private/{n}")) for n in range(5)]
    asks += [asyncio.create_task(cache.allowed("http://a.test/no-crawlstream/x"))]
    await until(lambda: source.fetched)
    source.gate.set()
    assert await asyncio.gather(*asks) == [True] * 5 + [False]
    assert source.fetched == ["http://a.test/robots.txt"]


async def test_a_cancelled_asker_does_not_cancel_the_load_for_others():
    source = FakeRobotsSource()
    source.gate.clear()
    cache = RobotsCache(source)
    first = asyncio.create_task(cache.allowed("http://a.test/no-crawlstream/x"))
    second = asyncio.create_task(cache.allowed("http://a.test/no-crawlstream/y"))
    await until(lambda: source.fetched)
    first.cancel()
    source.gate.set()
    assert await second is False
    assert source.fetched == ["http://a.test/robots.txt"]


async def test_rules_expire_after_their_ttl():
    """A file is fetched again after the TTL; a failed fetch is retried sooner."""
    clock = Clock()
    source = FakeRobotsSource({"http://down.test/robots.txt": RobotsFile(status=503)})
    cache = RobotsCache(source, clock=clock)
    await cache.allowed("http://a.test/1")
    await cache.allowed("http://down.test/1")
    clock.now += FAILURE_TTL_S - 1
    await cache.allowed("http://a.test/2")
    await cache.allowed("http://down.test/2")
    assert len(source.fetched) == 2
    clock.now += 2
    await cache.allowed("http://down.test/3")
    assert source.fetched.count("http://down.test/robots.txt") == 2
    clock.now += ROBOTS_TTL_S
    await cache.allowed("http://a.test/3")
    assert source.fetched.count("http://a.test/robots.txt") == 2


async def test_cache_size_is_bounded_and_least_recent_goes_first():
    """Beyond `max_origins` the least recently used origin is forgotten."""
    source = FakeRobotsSource()
    cache = RobotsCache(source, max_origins=2)
    await cache.allowed("http://a.test/")
    await cache.allowed("http://b.test/")
    await cache.allowed("http://a.test/again")
    await cache.allowed("http://c.test/")
    assert len(cache) == 2
    await cache.allowed("http://a.test/third")
    assert source.fetched.count("http://a.test/robots.txt") == 1
    await cache.allowed("http://b.test/again")
    assert source.fetched.count("http://b.test/robots.txt") == 2


async def test_exit_cancels_loads_still_running():
    source = FakeRobotsSource()
    source.gate.clear()
    async with RobotsCache(source) as cache:
        ask = asyncio.create_task(cache.allowed("http://a.test/1"))
        await until(lambda: source.fetched)
    with pytest.raises(asyncio.CancelledError):
        await ask


def test_origin_and_robots_url():
    assert Origin.of("HTTP://Example.com:80/a?b").robots_url == "http://example.com/robots.txt"
    assert Origin.of("https://[::1]:8443/").robots_url == "https://[::1]:8443/robots.txt"
    with pytest.raises(ValueError, match="no robots"):
        Origin.of("ftp://example.com/")


async def _serve(handler) -> web.AppRunner:
    app = web.Application()
    app.router.add_get("/robots.txt", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


async def test_http_source_goes_through_the_proxy_and_its_policy():
    """Through the real egress proxy: an allowlisted origin's file is read (with our token
    as user agent), a 404 comes back as 404, a target the policy blocks never sees a request
    and counts as allow-all, a slow one ends at the deadline with no answer."""
    seen: list[str] = []

    async def robots(request: web.Request) -> web.Response:
        seen.append(request.headers["User-Agent"])
        return web.Response(text=ROBOTS)

    async def missing(request: web.Request) -> web.Response:
        raise web.HTTPNotFound

    released = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await released.wait()
        return web.Response(text="")

    runners = [await _serve(handler) for handler in (robots, missing, hang, robots)]
    ok, gone, slow, private = (runner.addresses[0][1] for runner in runners)
    allowed = [f"127.0.0.1:{port}" for port in (ok, gone, slow)]
    try:
        async with (
            EgressProxy(UrlPolicy.create(allowed_hosts=allowed)) as proxy,
            HttpRobotsSource(proxy.access, deadline_s=1.0) as source,
        ):
            found = await source.fetch(f"http://127.0.0.1:{ok}/robots.txt")
            not_found = await source.fetch(f"http://127.0.0.1:{gone}/robots.txt")
            blocked = await source.fetch(f"http://127.0.0.1:{private}/robots.txt")
            timed_out = await source.fetch(f"http://127.0.0.1:{slow}/robots.txt")
    finally:
        released.set()
        for runner in runners:
            await runner.cleanup()
    assert (found.status, found.text) == (200, ROBOTS)
    assert seen == ["crawlstream"]
    assert not_found.status == 404
    assert blocked.status == 403
    assert timed_out.status is None


async def test_http_source_carries_the_proxy_credential_across_redirects_and_on_connect():
    """The credential goes with every hop of a redirect to another origin, and on the CONNECT
    of an https origin; the proxy answers no 407 and never forwards the credential."""
    forwarded: list[str | None] = []

    async def moved(request: web.Request) -> web.Response:
        forwarded.append(request.headers.get("Proxy-Authorization"))
        raise web.HTTPFound(f"http://127.0.0.1:{final}/robots.txt")

    async def robots(request: web.Request) -> web.Response:
        forwarded.append(request.headers.get("Proxy-Authorization"))
        return web.Response(text=ROBOTS)

    first_runner, final_runner = await _serve(moved), await _serve(robots)
    first, final = (runner.addresses[0][1] for runner in (first_runner, final_runner))
    tls_hellos: list[bytes] = []

    async def not_tls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tls_hellos.append(await reader.read(5))
        writer.close()

    plain = await asyncio.start_server(not_tls, "127.0.0.1", 0)
    https_port = plain.sockets[0].getsockname()[1]
    allowed = [f"127.0.0.1:{port}" for port in (first, final, https_port)]
    try:
        async with (
            EgressProxy(UrlPolicy.create(allowed_hosts=allowed)) as proxy,
            HttpRobotsSource(proxy.access, deadline_s=5.0) as source,
        ):
            redirected = await source.fetch(f"http://127.0.0.1:{first}/robots.txt")
            tunnelled = await source.fetch(f"https://127.0.0.1:{https_port}/robots.txt")
            unauthorized = proxy.unauthorized_total
    finally:
        plain.close()
        for runner in (first_runner, final_runner):
            await runner.cleanup()
    assert (redirected.status, redirected.text) == (200, ROBOTS)
    assert forwarded == [None, None]
    assert tunnelled.status is None  # the tunnel opened; TLS failed against a plain server
    assert [hello[:1] for hello in tls_hellos] == [b"\x16"]  # one TLS handshake got through
    assert unauthorized == 0


async def test_a_refusal_of_the_proxy_itself_is_no_answer_not_allow_all_for_an_hour():
    """Should the credential ever be wrong, the proxy's 407 is not read as the site's 4xx."""

    async def robots(request: web.Request) -> web.Response:
        return web.Response(text=ROBOTS)

    runner = await _serve(robots)
    port = runner.addresses[0][1]
    try:
        async with EgressProxy(UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{port}"])) as proxy:
            wrong = ProxyAccess(url=proxy.url, keys=ProxyKeys.generate())
            async with HttpRobotsSource(wrong, deadline_s=5.0) as source:
                answer = await source.fetch(f"http://127.0.0.1:{port}/robots.txt")
    finally:
        await runner.cleanup()
    assert answer.status is None
    assert answer.ttl_s == FAILURE_TTL_S
