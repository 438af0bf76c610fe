"""`skip_tls_verification` (Firecrawl's `skipTlsVerification`) against a site with a
self-signed certificate made here: honoured on both paths where `CRAWL_ALLOW_INSECURE_TLS`
allows it, a `tls` failure without the option, `invalid_request` on a worker without the
setting, and through the gateway with `firecrawl-py` either applied or named in the warning.
Real broker, workers, Chromium and gateway replicas."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from firecrawl import Firecrawl
from gateway import GatewayProcess
from harness import Topics, WorkerProcess, wait_for_leaders

from service.client import CrawlClient
from service.contracts import CrawlOptions, ErrorCode, EventType, PageResult
from service.messaging.topics import ensure_topics

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from testsite import TestSite

pytestmark = pytest.mark.integration

MARKER = "served over a self-signed certificate"
PAGE = f"<html><head><title>Self-signed</title></head><body><p>{MARKER}</p></body></html>"
FOLLOW_S = 120
SCRAPE_TIMEOUT_MS = 60_000


def _self_signed(directory: Path) -> ssl.SSLContext:
    """A server context with a certificate for 127.0.0.1 that nothing trusts."""
    openssl = shutil.which("openssl")
    assert openssl is not None, "the openssl CLI makes this test's certificate"
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


async def _page(_: web.Request) -> web.Response:
    return web.Response(text=PAGE, content_type="text/html")


@pytest.fixture(scope="module")
async def tls_url(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """The URL of a page on 127.0.0.1 over https with a self-signed certificate."""
    app = web.Application()
    app.router.add_get("/secure", _page)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(
            runner, "127.0.0.1", 0, ssl_context=_self_signed(tmp_path_factory.mktemp("tls"))
        ).start()
        yield f"https://127.0.0.1:{runner.addresses[0][1]}/secure"
    finally:
        await runner.cleanup()


@pytest.fixture(scope="module")
async def tls_topics(kafka: str, site: TestSite, tls_url: str) -> Topics:
    """This module's topics; the plain test site and the https site are allowlisted."""
    port = urlsplit(tls_url).port
    made = Topics(
        bootstrap=kafka,
        extra_env={"CRAWL_ALLOWED_HOSTS": f"127.0.0.1:{site.port},127.0.0.1:{port}"},
    )
    await ensure_topics(made.settings())
    await wait_for_leaders(made)
    return made


@pytest.fixture(scope="module")
async def allowing_worker(
    tls_topics: Topics, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[WorkerProcess]:
    """One worker with `CRAWL_ALLOW_INSECURE_TLS` on, otherwise default."""
    log = tmp_path_factory.mktemp("tls-worker") / "worker.log"
    worker = WorkerProcess(tls_topics.env(CRAWL_ALLOW_INSECURE_TLS="true"), log, "tls")
    try:
        await worker.start()
        yield worker
    finally:
        await worker.close()


async def _crawl(topics: Topics, url: str, options: CrawlOptions) -> PageResult:
    async with CrawlClient(topics.settings()) as client:
        [result] = await client.crawl([url], options, timeout_s=FOLLOW_S)
    return result


@pytest.mark.parametrize("render", ["browser", "http"])
async def test_a_self_signed_page_is_ok_with_the_option_where_the_worker_allows_it(
    tls_topics: Topics, allowing_worker: WorkerProcess, tls_url: str, render: str
):
    """`skip_tls_verification` on a worker with `CRAWL_ALLOW_INSECURE_TLS`: the page is ok,
    from the path asked for."""
    options = CrawlOptions(render=render, skip_tls_verification=True, formats=("markdown",))
    result = await _crawl(tls_topics, tls_url, options)
    assert result.ok, result.error
    assert result.rendered_by == render
    assert MARKER in (result.markdown or "")


@pytest.mark.parametrize("render", ["browser", "http"])
async def test_without_the_option_a_self_signed_page_fails_with_tls(
    tls_topics: Topics, allowing_worker: WorkerProcess, tls_url: str, render: str
):
    """The setting alone verifies as ever, also on the worker that has just served the page
    unverified (its context and connections are not reused): the page fails with `tls`."""
    result = await _crawl(tls_topics, tls_url, CrawlOptions(render=render))
    assert result.error is not None
    assert result.error.code == ErrorCode.TLS, result.error


async def test_a_worker_without_the_setting_rejects_the_option_as_invalid_request(
    topics: Topics, start_worker, tls_url: str
):
    """A request asking for it on a default worker ends `rejected`, `invalid_request`,
    naming the setting (a coordinator: no page is fetched)."""
    await start_worker(CRAWL_ROLE="coordinator")
    async with CrawlClient(topics.settings()) as client:
        submission = await client.submit([tls_url], CrawlOptions(skip_tls_verification=True))
        seen = [message async for message in client.follow(submission, timeout_s=FOLLOW_S)]
    assert not [message for message in seen if isinstance(message, PageResult)]
    terminal = seen[-1]
    assert terminal.type == EventType.REJECTED
    assert (terminal.detail or "").startswith("invalid_request: options.skip_tls_verification")
    assert "CRAWL_ALLOW_INSECURE_TLS" in (terminal.detail or "")


@pytest.fixture(scope="module")
async def gateways(
    tls_topics: Topics, allowing_worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, GatewayProcess]]:
    """Two gateway replicas on the module's topics: one allowing insecure TLS, one default."""
    logs = tmp_path_factory.mktemp("tls-gateways")
    started = {
        "allowing": GatewayProcess(
            tls_topics.env(CRAWL_ALLOW_INSECURE_TLS="true"), logs / "allowing.log", "allowing"
        ),
        "default": GatewayProcess(tls_topics.env(), logs / "default.log", "default"),
    }
    try:
        await asyncio.gather(*(gateway.start() for gateway in started.values()))
        yield started
    finally:
        for gateway in started.values():
            await gateway.close()


def _sdk(gateway: GatewayProcess) -> Firecrawl:
    return Firecrawl(api_key="fc-test", api_url=gateway.url)


async def test_firecrawl_py_skip_tls_verification_fetches_the_page_where_the_gateway_allows_it(
    gateways: dict[str, GatewayProcess], tls_url: str
):
    """`scrape(url, skip_tls_verification=True)` through a gateway with the setting: the
    self-signed page's document, no warning about it."""
    doc = await asyncio.to_thread(
        _sdk(gateways["allowing"]).scrape,
        tls_url,
        skip_tls_verification=True,
        timeout=SCRAPE_TIMEOUT_MS,
    )
    assert MARKER in (doc.markdown or "")
    assert "skipTlsVerification" not in (doc.warning or "")


async def test_firecrawl_py_skip_tls_verification_is_a_warning_where_the_gateway_verifies(
    gateways: dict[str, GatewayProcess], site: TestSite, tls_url: str
):
    """Through a default gateway the SDK's `skip_tls_verification=True` still scrapes a
    verifiable page, with a warning; the self-signed page fails (certificates verified)."""
    sdk = _sdk(gateways["default"])
    doc = await asyncio.to_thread(
        sdk.scrape, site.url("/page/3"), skip_tls_verification=True, timeout=SCRAPE_TIMEOUT_MS
    )
    assert doc.markdown
    assert "skipTlsVerification" in (doc.warning or "")
    with pytest.raises(Exception, match="tls") as failed:
        await asyncio.to_thread(
            sdk.scrape, tls_url, skip_tls_verification=True, timeout=SCRAPE_TIMEOUT_MS
        )
    assert MARKER not in str(failed.value)
