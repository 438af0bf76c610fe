"""The HTTP path's fetch, through the real egress proxy and the local test site."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from testsite import hit_counter

from service.content.page import PageContent
from service.egress.proxy import EgressProxy
from service.http.static import MAX_REDIRECTS, StaticAnswer, StaticFetcher, decode
from service.net.policy import UrlPolicy

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from testsite import TestSite

DEADLINE_S = 10.0
MAX_BYTES = 20_000_000


@asynccontextmanager
async def _fetcher(site: TestSite) -> AsyncIterator[tuple[StaticFetcher, EgressProxy]]:
    policy = UrlPolicy.create(allowed_hosts=[f"127.0.0.1:{site.port}"])
    async with EgressProxy(policy) as proxy, StaticFetcher(proxy.access, policy) as fetcher:
        yield fetcher, proxy


async def _fetch(site: TestSite, path_or_url: str, **options: float) -> StaticAnswer | PageContent:
    url = path_or_url if "://" in path_or_url else site.url(path_or_url)
    async with _fetcher(site) as (fetcher, _):
        return await fetcher.fetch(
            url,
            timeout_s=options.get("timeout_s", DEADLINE_S),
            max_bytes=int(options.get("max_bytes", MAX_BYTES)),
        )


def _code(outcome: StaticAnswer | PageContent) -> str:
    assert isinstance(outcome, PageContent), outcome
    assert outcome.error is not None
    return outcome.error.code.value


async def test_a_page_comes_through_the_proxy_with_its_status_type_and_body(site):
    answer = await _fetch(site, "/page/3")
    assert isinstance(answer, StaticAnswer)
    assert (answer.status, answer.kind, answer.truncated) == (200, "html", False)
    assert "<h1>Page 3</h1>" in answer.body


async def test_redirects_are_followed_hop_by_hop_and_capped(site):
    """Three hops end on the final page; more than the cap is `http_error`."""
    followed = await _fetch(site, "/redirect/chain/3")
    assert isinstance(followed, StaticAnswer)
    assert followed.url == site.url("/page/1")
    assert _code(await _fetch(site, f"/redirect/chain/{MAX_REDIRECTS + 1}")) == "http_error"


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_private_target_and_a_redirect_to_one_are_blocked_and_never_reached(site, scheme):
    """Directly and through a redirect, plain and through CONNECT: `blocked`, 0 hits."""
    async with hit_counter() as private:
        target = f"{scheme}://127.0.0.1:{private.port}/x"
        redirect = f"/hostile/private-redirect?target={quote(target, safe='')}"
        outcomes = [await _fetch(site, target), await _fetch(site, redirect)]
        assert [_code(outcome) for outcome in outcomes] == ["blocked", "blocked"]
        assert private.hits == 0


@pytest.mark.parametrize("target", ["file:///etc/passwd", "data:text/html,x", "ftp://a.test/"])
async def test_a_redirect_to_another_scheme_is_blocked_before_it_is_sent(site, target):
    assert _code(await _fetch(site, f"/nav/redirect/c?to={quote(target, safe='')}")) == "blocked"


async def test_the_body_is_read_up_to_the_cap_and_marked_truncated(site):
    answer = await _fetch(site, "/large?kb=300", max_bytes=100_000)
    assert isinstance(answer, StaticAnswer)
    assert answer.truncated
    assert len(answer.body.encode()) <= 100_000


async def test_a_slow_page_ends_at_its_deadline(site):
    assert _code(await _fetch(site, "/slow?ms=5000", timeout_s=0.5)) == "timeout"


async def test_content_kinds_and_downloads(site):
    """text/plain is text, a PDF is read as bytes (`data`), an attachment is marked."""
    text, pdf, download = [
        await _fetch(site, path) for path in ("/text/plain", "/binary/pdf", "/hostile/download")
    ]
    assert isinstance(text, StaticAnswer)
    assert (text.kind, text.body) == ("text", "Plain text answer.\nSecond line.\n")
    assert isinstance(pdf, StaticAnswer)
    assert (pdf.kind, pdf.body, pdf.data[:9]) == ("pdf", "", b"%PDF-1.4\n")
    assert isinstance(download, StaticAnswer)
    assert download.attachment
    assert download.body == ""


async def test_retry_after_is_kept_for_the_retry_path(site):
    answer = await _fetch(site, "/flaky/static-retry-after?fail=5&status=429&retry_after=7")
    assert isinstance(answer, StaticAnswer)
    assert (answer.status, answer.retry_after) == (429, "7")


async def test_the_proxy_sees_its_credential_and_refuses_nothing_of_ours(site):
    async with _fetcher(site) as (fetcher, proxy):
        await fetcher.fetch(site.url("/redirect/chain/2"), timeout_s=DEADLINE_S, max_bytes=1000)
        assert proxy.unauthorized_total == 0


def test_decoding_follows_the_header_then_the_meta_charset_then_utf8():
    latin = "<meta charset='iso-8859-1'><p>caf\u00e9</p>".encode("latin-1")
    assert "caf\u00e9" in decode(latin, None, html=True)
    assert "caf\u00e9" in decode("caf\u00e9".encode("cp1252"), "cp1252", html=False)
    assert decode(b"\xff ok", None, html=False) == "\ufffd ok"
    assert decode("caf\u00e9".encode(), "no-such-charset", html=True) == "caf\u00e9"
