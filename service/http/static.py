"""Fetch a page with one HTTP request per hop (aiohttp), through the worker's egress proxy.

The browser's URL policy is the proxy's, so this path goes through the same proxy with the
same credential: the proxy resolves each target once, checks every address, connects to the
checked one, applies the egress ports and `CRAWL_ALLOWED_HOSTS`, and answers a refused target
with 403 and `X-Crawlstream-Blocked` (a plain request) or refuses the CONNECT (https). Redirects
are followed here, hop by hop, so each hop is a new request the proxy judges; a hop to another
scheme is refused before it is sent, and more than `MAX_REDIRECTS` hops is `http_error`.

A request's cookies and user agent go with every hop, its headers with those its
`headers_scope` allows (`identity.py`); its certificates are verified unless it asks for
`skip_tls_verification` (aiohttp keys pooled connections by that choice, so an unverified
connection never serves a verifying request). No cookies are kept (every request is
isolated, as with a browser context of its own), no subresource is loaded and no script
runs. aiohttp speaks HTTP/1.1 only: HTTP/2 would need httpx with h2, and through this proxy
(one request per plain connection, CONNECT tunnels for https) it would help only https
origins; not done.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal, Self
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp import hdrs

from service.content.page import PageContent, failed
from service.content.pdf import is_pdf
from service.contracts import ErrorCode
from service.egress.verdict import proxy_refusal, proxy_verdict
from service.http.identity import HttpIdentity
from service.net.policy import BlockedUrlError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping
    from types import TracebackType

    from multidict import CIMultiDictProxy

    from service.egress.auth import ProxyAccess
    from service.net.policy import UrlPolicy

__all__ = ["MAX_REDIRECTS", "ContentKind", "StaticAnswer", "StaticFetcher"]

NO_IDENTITY: Final = HttpIdentity()
"""A fetch that sends only what every fetch sends."""

MAX_REDIRECTS: Final = 10
"""Server redirects followed; one more is `http_error` (the browser path's own limit for a
page that keeps navigating)."""

USER_AGENT: Final = "Mozilla/5.0 (compatible; crawlstream/1.0)"

ACCEPT: Final = "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.8"

MAX_CONNECTIONS: Final = 256
"""Connections to the egress proxy at once (it holds 512 for the browser and this client)."""

CHUNK_BYTES: Final = 64 * 1024

CHARSET_SNIFF_BYTES: Final = 1024
"""Bytes of an HTML document searched for `<meta charset>` when the header names none (the
HTML standard's prescan looks at the first 1024)."""

_META_CHARSET: Final = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE
)

_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})

HTML_TYPES: Final = frozenset({"text/html", "application/xhtml+xml", ""})
"""Media types extracted as HTML (a missing type is sniffed as HTML, as browsers do)."""

TEXT_TYPES: Final = frozenset({"text/plain"})
"""Media types returned as text."""

ContentKind = Literal["html", "text", "pdf", "other"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticAnswer:
    """The final answer of a fetch, redirects followed; `body` is read only for HTML and text,
    `data` only for a PDF."""

    url: str
    status: int
    media_type: str
    kind: ContentKind
    body: str
    truncated: bool
    """The body was longer than the byte cap and was cut."""
    retry_after: str | None
    attachment: bool
    """The server asked to save the answer as a file (`Content-Disposition: attachment`)."""
    data: bytes = b""
    """The bytes of a PDF (kind `pdf`)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """The answer's headers, lower-case names (the first of a repeated one)."""


class StaticFetcher:
    """`async with StaticFetcher(proxy, policy) as fetcher:` one aiohttp session per worker."""

    def __init__(self, proxy: ProxyAccess, policy: UrlPolicy) -> None:
        self._proxy = proxy
        self._proxy_url = proxy.url
        self._proxy_auth = {str(hdrs.PROXY_AUTHORIZATION): proxy.credential.header_value}
        self._policy = policy
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession(
            headers={hdrs.USER_AGENT: USER_AGENT, hdrs.ACCEPT: ACCEPT},
            connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS),
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),  # each fetch has its own deadline
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def fetch(
        self,
        url: str,
        *,
        timeout_s: float,
        max_bytes: int,
        identity: HttpIdentity = NO_IDENTITY,
    ) -> StaticAnswer | PageContent:
        """The answer at the end of `url`'s redirects, or a failed result saying why not;
        every hop sends the request's `identity` (headers, matching cookies, user agent)."""
        try:
            async with asyncio.timeout(timeout_s), self._routed(identity.proxy) as auth:
                return await self._follow(url, max_bytes, identity, auth)
        except TimeoutError:
            return failed(ErrorCode.TIMEOUT, f"page did not finish within {timeout_s:.1f} s")
        except aiohttp.ClientHttpProxyError as exc:  # the proxy refused a CONNECT (https)
            refused = proxy_verdict(str(exc.request_info.real_url), exc.status, exc.headers or {})
            return refused or failed(ErrorCode.CONNECTION, f"egress proxy answered {exc.status}")
        except aiohttp.ClientSSLError as exc:
            return failed(ErrorCode.TLS, f"{url}: {exc}")
        except aiohttp.InvalidURL as exc:
            return failed(ErrorCode.INVALID_URL, f"invalid URL {exc}")
        except (aiohttp.ClientError, OSError) as exc:
            return failed(ErrorCode.CONNECTION, f"{url}: {type(exc).__name__}: {exc}")

    @contextlib.asynccontextmanager
    async def _routed(self, proxy: str | None) -> AsyncIterator[dict[str, str]]:
        """The `Proxy-Authorization` of one fetch: the worker's, or, for a request naming an
        upstream `proxy`, a credential of the fetch's own that the egress proxy routes
        through it (and forgets after)."""
        routes = self._proxy.routes
        if proxy is None or routes is None:
            yield self._proxy_auth
            return
        credential = self._proxy.for_context()
        routes.route(credential.username, proxy)
        try:
            yield {str(hdrs.PROXY_AUTHORIZATION): credential.header_value}
        finally:
            routes.unroute(credential.username)

    async def _follow(
        self, url: str, max_bytes: int, identity: HttpIdentity, auth: Mapping[str, str]
    ) -> StaticAnswer | PageContent:
        for _hop in range(MAX_REDIRECTS + 1):
            try:
                self._policy.check_url(url)  # scheme and literal addresses, before sending
            except BlockedUrlError as exc:
                return failed(ErrorCode.BLOCKED, str(exc))
            headers = identity.headers_for(url)
            if urlsplit(url).scheme == "http":
                headers.update(auth)
            async with self._session_or_fail().get(
                url,
                proxy=self._proxy_url,
                proxy_headers=auth,  # sent on a CONNECT (https)
                headers=headers,
                allow_redirects=False,
                ssl=identity.verify_tls,  # pooled connections are kept apart by it
            ) as response:
                refused = proxy_refusal(url, response.status, response.headers)
                if refused is not None:
                    return refused
                location = response.headers.get(hdrs.LOCATION)
                if response.status not in _REDIRECTS or not location:
                    return await _answer(response, max_bytes)
            url = urljoin(str(response.url), location).partition("#")[0]
        return failed(ErrorCode.HTTP_ERROR, f"more than {MAX_REDIRECTS} redirects")

    def _session_or_fail(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("StaticFetcher is used outside its `async with`")
        return self._session


async def _answer(response: aiohttp.ClientResponse, max_bytes: int) -> StaticAnswer:
    media_type = response.content_type.lower() if hdrs.CONTENT_TYPE in response.headers else ""
    kind = content_kind(media_type)
    attachment = _is_attachment(response.headers)
    body, truncated = b"", False
    if kind == "pdf" or (kind != "other" and not attachment):
        body, truncated = await _read_capped(response, max_bytes)
    return StaticAnswer(
        url=str(response.url),
        status=response.status,
        media_type=media_type,
        kind=kind,
        body="" if kind == "pdf" else decode(body, response.charset, html=kind == "html"),
        truncated=truncated,
        retry_after=response.headers.get(hdrs.RETRY_AFTER),
        attachment=attachment,
        data=body if kind == "pdf" else b"",
        headers={name.lower(): value for name, value in reversed(list(response.headers.items()))},
    )


def content_kind(media_type: str) -> ContentKind:
    """How a media type is read: extracted as HTML, returned as text, read as a PDF, or none."""
    if media_type in HTML_TYPES:
        return "html"
    if is_pdf(media_type):  # read also when sent as an attachment
        return "pdf"
    return "text" if media_type in TEXT_TYPES else "other"


def decode(body: bytes, charset: str | None, *, html: bool) -> str:
    """`body` as text: the header's charset, else an HTML document's `<meta charset>`, else
    UTF-8; undecodable bytes become U+FFFD."""
    for candidate in (charset, _meta_charset(body) if html else None):
        if candidate and _known_codec(candidate):
            return body.decode(candidate, errors="replace")
    return body.decode("utf-8", errors="replace")


def _meta_charset(body: bytes) -> str | None:
    found = _META_CHARSET.search(body[:CHARSET_SNIFF_BYTES])
    return found.group(1).decode("ascii") if found else None


def _known_codec(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


def _is_attachment(headers: CIMultiDictProxy[str]) -> bool:
    disposition = headers.get(hdrs.CONTENT_DISPOSITION, "")
    return disposition.split(";")[0].strip().lower() == "attachment"


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    """The first `max_bytes` of the (decompressed) body, and whether there was more."""
    body = bytearray()
    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
        body += chunk
        if len(body) > max_bytes:
            return bytes(body[:max_bytes]), True  # unread rest: aiohttp drops the connection
    return bytes(body), False
