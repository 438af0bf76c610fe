"""What a page gives back: `PageResult` (the page's `PageFields` under its key) with its
error codes, links, metadata, structured data and document information; the dead-letter
codes."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
)

from service.contracts.base import SCHEMA_VERSION, Timestamp
from service.contracts.options import CacheState, PageChange, RenderedBy
from service.contracts_actions import ActionsOutput


class DeadLetterCode(StrEnum):
    """Why a record went to the dead-letter topic (its `crawlstream-error-code` header)."""

    EMPTY = "empty"
    """The record has no value."""
    TOO_LARGE = "too_large"
    """Its value is larger than `CRAWL_MAX_REQUEST_BYTES`."""
    NOT_UTF8 = "not_utf8"
    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"
    """JSON, but not an object."""
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    INVALID_REQUEST = "invalid_request"
    """Not a valid request (also: JSON nested too deeply, metadata over
    `CRAWL_MAX_METADATA_BYTES`, a pages-topic record that is not a page task)."""
    INVALID_SELECTOR = "invalid_selector"
    """A selector of `include_tags`, `exclude_tags` or `extract` that does not parse."""
    POISON = "poison"
    """Delivered more than `CRAWL_MAX_DELIVERIES` times to workers that died under it."""
    INTERNAL = "internal"
    """A bug: the message names the exception."""
    PUBLISH_FAILED = "publish_failed"
    """The record's output could never be published."""


class ErrorCode(StrEnum):
    """Why a page has no content."""

    TIMEOUT = "timeout"
    """The page did not finish within its deadline."""
    HTTP_ERROR = "http_error"
    """The server answered with status 400 or above."""
    DNS = "dns"
    """The host name did not resolve."""
    CONNECTION = "connection"
    """The connection was refused, reset or broke off."""
    TLS = "tls"
    """The TLS handshake or certificate failed."""
    BLOCKED = "blocked"
    """The URL policy forbids the target (scheme, private address)."""
    ROBOTS = "robots"
    """robots.txt disallows the URL and the request asked to respect it."""
    INVALID_URL = "invalid_url"
    """The URL cannot be parsed or loaded."""
    INVALID_SELECTOR = "invalid_selector"
    """The request's `wait_for` is not a selector the browser can evaluate (a syntax error, an
    unknown selector engine); every page of that request fails the same way. (A selector of
    `include_tags`, `exclude_tags` or `extract` that does not parse is rejected at intake with
    this code.)"""
    ACTION_FAILED = "action_failed"
    """A step of the request's `actions` failed (its element never appeared, its script
    threw, it ran past its deadline); the message names the step (1-based) and why."""
    PROXY_ERROR = "proxy_error"
    """The request's upstream `proxy` refused the connection, rejected its credentials (407)
    or failed; retried like `connection`."""
    BROWSER_CRASH = "browser_crash"
    """The renderer or the browser died while loading the page."""
    TOO_LARGE = "too_large"
    """The page, or the work its content takes, is larger than the worker accepts: a
    document too deeply nested to parse, content extraction past `CRAWL_CONTENT_BUDGET` (a
    selector that backtracks, a PDF bomb), a PDF cut at the byte cap, or a result whose
    uncuttable fields (`json`, `actions`, screenshots) pass `CRAWL_MAX_RESULT_BYTES`."""
    DOWNLOAD = "download"
    """The URL is a file download, not a page."""
    INTERNAL = "internal"
    """A bug in the worker; the message says more."""
    POISON = "poison"
    """The request record was delivered more than `CRAWL_MAX_DELIVERIES` times (each time its
    worker died); it is quarantined in the dead letters instead of being run again."""
    CANCELLED = "cancelled"
    """The request was cancelled (control topic) before this page finished."""
    DEADLINE = "deadline"
    """The request's `deadline_ms` passed before this page finished."""
    NOT_RENDERED = "not_rendered"
    """The browser loaded the page, but its document stayed an app shell (an empty mount
    point or main landmark, little text) for as long as the worker waits for scripts to fill
    it: the page's content never appeared (a script failed, or it needs what the crawl does
    not give it, such as a login)."""
    CACHE_MISS = "cache_miss"
    """`cache_only` was asked and the page cache holds no usable entry for the page (the
    site was not contacted)."""
    BLOCKED_BY_SITE = "blocked_by_site"
    """The site answered with a bot challenge or block page (403, 429 or 503 with the marks of
    Cloudflare, Akamai, PerimeterX, DataDome, or a reCAPTCHA, hCaptcha or Turnstile form; the
    message says what was seen). Retried like a 429; nothing tries to get past it."""


class RecordSource(BaseModel):
    """The request record a result or event came from: equal across redeliveries of that
    record, different for two records that reuse one request_id."""

    model_config = ConfigDict(frozen=True)

    topic: str
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class PageError(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: ErrorCode
    message: str


class Links(BaseModel):
    model_config = ConfigDict(frozen=True)

    internal: list[str] = Field(default_factory=list)
    """Absolute, deduplicated links to the page's own host."""
    external: list[str] = Field(default_factory=list)
    """Absolute, deduplicated links to other hosts."""


class PageMetadata(BaseModel):
    model_config = ConfigDict(frozen=True)

    title: str | None = None
    description: str | None = None
    language: str | None = None
    canonical: str | None = None
    open_graph: dict[str, str] = Field(default_factory=dict)
    """`og:*` properties without the prefix, e.g. `{"title": ..., "image": ...}`."""


class StructuredData(BaseModel):
    """What a page declares about itself in machine-readable markup."""

    model_config = ConfigDict(frozen=True)

    json_ld: list[JsonValue] = Field(default_factory=list)
    """Each `<script type="application/ld+json">` block, parsed (a block holding an array
    gives its items); blocks that are not JSON are left out."""
    microdata: list[dict[str, JsonValue]] = Field(default_factory=list)
    """Top-level `itemscope` items: `{"type": ..., "properties": {...}}` (an item's value as
    another item, repeated properties as lists)."""
    open_graph: dict[str, str] = Field(default_factory=dict)
    """Open Graph properties with their prefix, e.g. `{"og:title": ...}`; the first of a
    repeated property."""


class DocumentInfo(BaseModel):
    """A page that is a document (a PDF) rather than HTML."""

    model_config = ConfigDict(frozen=True)

    type: Literal["pdf"] = "pdf"
    title: str | None = None
    author: str | None = None
    page_count: int = Field(ge=0)
    """The document's own number of pages."""
    pages_read: int = Field(ge=0)
    """Pages whose text is in the result: at most `CRAWL_MAX_PDF_PAGES` (`truncated` says
    when fewer than `page_count`)."""
    text_layer: bool = True
    """False for a scanned document: its pages are images without text, so markdown and text
    are empty (no OCR is done)."""


class PageFields(BaseModel):
    """What a page gave, as the wire result carries it: declared once, here. `PageResult`
    extends it, and the fetcher's content model (`service.content.page.PageContent`) fills it,
    so a field renamed here is renamed on both sides."""

    model_config = ConfigDict(frozen=True, validate_by_name=True, serialize_by_alias=True)

    final_url: str | None = None
    """Where the page ended after redirects."""
    ok: bool
    status_code: int | None = None
    error: PageError | None = None
    title: str | None = None
    markdown: str | None = None
    text: str | None = None
    html: str | None = None
    links: Links | None = None
    metadata: PageMetadata | None = None
    screenshot: str | None = None
    """PNG, base64."""
    pdf: str | None = None
    """The rendered page printed to PDF (format `pdf`), base64."""
    json_data: JsonValue = Field(default=None, alias="json")
    """What the request's `extract` schema read (a list of objects, or one object)."""
    structured_data: StructuredData | None = None
    document: DocumentInfo | None = None
    """Set when the URL answered with a PDF: its metadata and how much of it was read."""
    actions: ActionsOutput | None = None
    """What the request's `actions` gave: screenshots and script values, in step order."""
    truncated: bool = False
    """Some content was cut at the worker's `CRAWL_MAX_RESULT_BYTES`, or a PDF's text at
    `CRAWL_MAX_PDF_PAGES`."""
    rendered_by: RenderedBy | None = None
    """The path that produced this result: `browser` or `http` (see `CrawlOptions.render`);
    null for pages never fetched (refused by the URL policy or robots.txt, cancelled, past the
    request's deadline, quarantined)."""
    cache_state: CacheState | None = None
    """How the page cache took part: `hit` (an entry younger than `max_age_ms`), `revalidated`
    (an older entry the site confirmed with 304), `miss` (fetched, and stored when allowed),
    `bypass` (the request is not eligible: headers, cookies, a session, a proxy, actions or
    credentials in the URL); null for pages that never reached the cache."""
    cached_at: Timestamp | None = None
    """When the content this result carries was fetched: for `hit` and `revalidated` the
    entry's first fetch; for a stored `miss` now; null when nothing was stored."""
    change_tracking: PageChange | None = None
    """How the page compares with its previous observation, when the request asked for
    `change_tracking` (null when it did not, or the page could not be compared: a failure
    other than 404 or 410)."""


class _ResultKey(BaseModel):
    """Which page of which request a result answers: the first fields of `PageResult`."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: str
    result_id: str
    """sha256(request_id + newline + url), first 32 hex digits: equal across redeliveries."""
    run_id: str
    """The run that dispatched this page (a redelivery starts a new run; a page an earlier
    run dispatched and a fetcher answered after a coordinator's failover keeps that run's
    id: count results by `result_id`, not by run)."""
    url: str


class PageResult(PageFields, _ResultKey):
    """One page of a request, written by workers to the results topic, keyed by request_id.

    A result larger than the producer's message limit travels as ordered chunks of its JSON
    (see docs/contracts.md, "Large results"); `crawlstream.client` reassembles them.
    """

    # Pydantic orders fields from the last base on: the key, the page's fields, then these.
    model_config = ConfigDict(frozen=True, validate_by_name=True, serialize_by_alias=True)

    elapsed_ms: int
    fetched_at: Timestamp
    worker: str
    """The fetcher (`CRAWL_WORKER_NAME`) that rendered the page."""
    request_metadata: dict[str, JsonValue] = Field(default_factory=dict)
    source: RecordSource | None = None
    """The request record this result answers (null only from workers before this field)."""
    depth: int = Field(default=0, ge=0)
    """Links followed from a seed to reach this page (0: a seed or a sitemap page)."""
    parent_url: str | None = None
    """The page whose link admitted this one (null for seeds and sitemap pages)."""
