"""The wire messages: the pydantic models are the source of truth for every topic.

`schemas/` holds their JSON Schema and an AsyncAPI document, generated from these models by
`crawlstream schemas` and checked by a test.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    RootModel,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from service.contracts_actions import Actions, ActionsOutput
from service.contracts_identity import (
    MAX_COOKIES,
    Cookie,
    DeviceName,
    Geolocation,
    Headers,
    HeadersScope,
    Locale,
    ProxyOption,
    TimeZone,
    UserAgent,
    Viewport,
)
from service.patterns import compile_patterns
from service.selectors import MAX_SELECTOR_CHARS, css_problem

SCHEMA_VERSION: Final = 1
"""The version every message of this module carries; a reader rejects any other."""

DEFAULT_MAX_URLS: Final = 100
"""URLs per request when the validation context names no other limit."""

DEFAULT_MAX_CRAWL_PAGES: Final = 10_000
"""`crawl.max_pages` ceiling when the validation context names no other limit."""

MAX_CRAWL_DEPTH: Final = 100
"""Deepest `crawl.max_depth` accepted."""

MAX_URL_LENGTH: Final = 4096
"""Longest URL accepted; longer ones are not URLs a browser will load."""

ALLOWED_SCHEMES: Final = frozenset({"http", "https"})

RequestId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]

SessionKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]


EARLIEST_TIMESTAMP: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""No timestamp of any contract is earlier (the Unix epoch)."""

LATEST_TIMESTAMP: Final = datetime(3000, 1, 1, tzinfo=UTC)
"""Every timestamp of every contract is earlier: far enough for any real deadline, far
enough from `datetime.max` that adding a retention or a deadline cannot overflow."""


def utc_now() -> datetime:
    return datetime.now(tz=UTC)


def _aware_bounded_utc(value: datetime) -> datetime:
    """`value` in UTC; a clear error when it has no offset or lies outside
    [EARLIEST_TIMESTAMP, LATEST_TIMESTAMP)."""
    if value.utcoffset() is None:
        raise ValueError(
            f"{value.isoformat()} has no time zone: add `Z` (UTC) or an offset such as `+01:00`"
        )
    if not EARLIEST_TIMESTAMP <= value < LATEST_TIMESTAMP:  # compares offsets: cannot overflow
        raise ValueError(
            f"must be from {EARLIEST_TIMESTAMP.isoformat()} and before"
            f" {LATEST_TIMESTAMP.isoformat()}, got {value.isoformat()}"
        )
    return value.astimezone(UTC)


Timestamp = Annotated[
    datetime,
    AfterValidator(_aware_bounded_utc),
    Field(
        description="RFC 3339 with its offset (`Z` or `+hh:mm`); a time without an offset is"
        " rejected, as is one before 1970-01-01 or from 3000-01-01 (UTC)."
    ),
]
"""Every instant of every contract: time-zone aware (a naive time is rejected, never
guessed), bounded (so arithmetic on it cannot overflow), normalised to UTC."""


def result_id_for(request_id: str, url: str) -> str:
    """The deterministic ID of the result of `url` within `request_id` (redeliveries share it)."""
    return hashlib.sha256(f"{request_id}\n{url}".encode()).hexdigest()[:32]


class Format(StrEnum):
    """What a request asks to get back for each page."""

    MARKDOWN = "markdown"
    TEXT = "text"
    HTML = "html"
    LINKS = "links"
    METADATA = "metadata"
    SCREENSHOT = "screenshot"
    STRUCTURED_DATA = "structured_data"
    """JSON-LD, microdata and Open Graph, parsed (`PageResult.structured_data`)."""
    PDF = "pdf"
    """The rendered page printed to PDF (`PageResult.pdf`); the browser only."""


class ResourceType(StrEnum):
    """Browser resource types a request may block to save time and memory."""

    IMAGE = "image"
    FONT = "font"
    MEDIA = "media"
    STYLESHEET = "stylesheet"


DEFAULT_FORMATS: Final = (Format.LINKS, Format.MARKDOWN, Format.METADATA)


def _sorted_unique(values: tuple[StrEnum, ...]) -> tuple[StrEnum, ...]:
    return tuple(sorted(set(values)))


class _Untrusted(BaseModel):
    """Base of messages written by other teams' producers: strict about unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


MAX_SHAPING_SELECTORS: Final = 32
"""Selectors in each of `include_tags` and `exclude_tags`."""

MAX_EXTRACT_FIELDS: Final = 200
"""Fields in one `extract` schema, nested ones included."""

MAX_EXTRACT_DEPTH: Final = 5
"""Levels of `nested` and `list` fields with `fields` inside one another."""


def _css_selector(selector: str) -> str:
    """`selector` when lexbor (the engine that applies it) parses it; else `invalid_selector`."""

    problem = css_problem(selector)
    if problem is not None:
        raise PydanticCustomError(
            "invalid_selector",
            "{selector} is not a CSS selector: {problem}",
            {"selector": repr(selector), "problem": problem},
        )
    return selector


CssSelector = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_SELECTOR_CHARS),
    AfterValidator(_css_selector),
]
"""A CSS selector that lexbor parses; a request with one that does not is rejected with
`invalid_selector`."""

ExtractType = Literal["text", "html", "attribute", "number", "list", "nested"]


class ExtractField(_Untrusted):
    """One field of an `extract` schema, read from the elements `selector` matches within
    the object's element."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    """The key in the object."""
    selector: CssSelector | None = None
    """Where the value is, within the object's element; absent: the element itself."""
    type: ExtractType = "text"
    """`text` (whitespace collapsed), `html` (outer HTML), `attribute` (`attribute`'s value,
    as written), `number` (the first number in the text; `,` groups thousands), `list` (every
    match: strings of their text, or objects of `fields`), `nested` (an object of `fields`
    read within the first match). The others read the first match."""
    attribute: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    """The attribute read by `type: attribute`."""
    fields: tuple[ExtractField, ...] | None = Field(default=None, min_length=1)
    """The fields of each object of a `nested` or `list` field."""
    default: JsonValue = None
    """The value when the selector matches nothing (or the attribute or number is absent)."""

    @model_validator(mode="after")
    def _consistent(self) -> ExtractField:
        if self.type == "attribute" and self.attribute is None:
            raise ValueError(f"field {self.name!r}: type `attribute` needs `attribute`")
        if self.type == "nested" and self.fields is None:
            raise ValueError(f"field {self.name!r}: type `nested` needs `fields`")
        if self.fields is not None and self.type not in {"nested", "list"}:
            raise ValueError(f"field {self.name!r}: only `nested` and `list` take `fields`")
        return self


def _size_of(fields: tuple[ExtractField, ...], depth: int = 1) -> int:
    if depth > MAX_EXTRACT_DEPTH:
        raise ValueError(f"extract: fields nested more than {MAX_EXTRACT_DEPTH} deep")
    return sum(1 + _size_of(field.fields or (), depth + 1) for field in fields)


class ExtractSchema(_Untrusted):
    """A selector schema: the page's data as a list of objects (one per `base_selector`
    match) or one object (without it), on the result's `json`."""

    base_selector: CssSelector | None = None
    """One object per element it matches, in document order; absent: one object, the page."""
    fields: tuple[ExtractField, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _bounded(self) -> ExtractSchema:
        if _size_of(self.fields) > MAX_EXTRACT_FIELDS:
            raise ValueError(f"extract: more than {MAX_EXTRACT_FIELDS} fields")
        return self


RenderMode = Literal["browser", "http", "auto"]
"""How a request's pages are fetched (`CrawlOptions.render`)."""

RenderedBy = Literal["browser", "http"]
"""Which path produced a page's result (`PageResult.rendered_by`)."""

CacheState = Literal["hit", "revalidated", "miss", "bypass"]
"""How the page cache took part in a result (`PageResult.cache_state`)."""

ChangeStatus = Literal["new", "same", "changed", "removed"]
"""What a tracked page is next to the previous observation of its history
(`PageResult.change_tracking.status`)."""

MAX_CHANGE_TAG_CHARS: Final = 128
"""Longest `change_tracking.tag`."""


class ChangeTracking(_Untrusted):
    """Compare each page with its previous observation (`CrawlOptions.change_tracking`): see
    docs/changes.md."""

    tag: Annotated[str, StringConstraints(min_length=1, max_length=MAX_CHANGE_TAG_CHARS)] | None = (
        None
    )
    """A separate history: pages tracked under one tag are compared only with observations
    under the same tag (and the same page variant and reading options); null is a tag too."""
    diff: bool = False
    """Add a unified diff of the page's Markdown to `changed` pages."""
    ignore: tuple[CssSelector, ...] = Field(default=(), max_length=MAX_SHAPING_SELECTORS)
    """CSS selectors of elements whose content never counts as change (beside the default
    noise: scripts, styles, hidden inputs, attributes, `<time>` elements, whitespace)."""


class PageChange(BaseModel):
    """How a tracked page compares with its previous observation (`PageResult.change_tracking`)."""

    model_config = ConfigDict(frozen=True)

    status: ChangeStatus
    """`new`: no previous observation under this tag; `same`: its content is unchanged up to
    noise; `changed`; `removed`: it answered before and now answers 404 or 410."""
    previous_fetched_at: Timestamp | None = None
    """When the previous observation was fetched (null for `new`)."""
    visibility: Literal["visible", "hidden"] = "visible"
    """`hidden`: the page still answers but a deep crawl no longer reaches it by links."""
    diff: str | None = None
    """A unified diff of the Markdown (old, then new), when asked and the page `changed`."""


WaitSelector = Annotated[str, StringConstraints(min_length=1, max_length=MAX_SELECTOR_CHARS)]
"""A CSS selector to wait for (checked by the browser when it waits)."""


class CrawlOptions(_Untrusted):
    """How each page of a request is fetched and what comes back."""

    formats: tuple[Format, ...] = Field(default=DEFAULT_FORMATS, min_length=1)
    """Outputs wanted per page."""
    wait_until: Literal["load", "domcontentloaded", "networkidle"] = "load"
    """Navigation event to wait for before extracting."""
    wait_for: WaitSelector | None = None
    """CSS selector that must be attached before extracting (catches JavaScript-inserted
    content); a page where it never appears fails with `timeout`, one the browser cannot
    evaluate with `invalid_selector`."""
    timeout_ms: int = Field(default=30_000, ge=100)
    """Deadline for the whole page (navigation, waits, extraction); the worker clamps it to
    its `CRAWL_MAX_PAGE_TIMEOUT`."""
    block_resources: tuple[ResourceType, ...] = ()
    """Resource types the browser does not load."""
    screenshot_full_page: bool = False
    """Capture the full scrollable page instead of the viewport."""
    respect_robots: bool = False
    """Skip (result `robots`) URLs that the host's robots.txt disallows."""
    deadline_ms: int | None = Field(default=None, ge=100)
    """Budget of the whole request from the moment a worker accepts it (separate from the
    per-page `timeout_ms`); when it passes, pages still running are closed, the others get
    `deadline` results and the run ends `expired`. Clamped to `CRAWL_MAX_REQUEST_DEADLINE`."""
    render: RenderMode = "browser"
    """How pages are fetched: `browser` (headless Chromium, runs scripts), `http` (one HTTP
    request per page, no scripts: an order of magnitude cheaper), or `auto` (HTTP first, the
    browser when the page needs it: an app shell, `wait_for` not in the static HTML, a
    screenshot, a content type the browser handles better, or a host whose pages keep needing
    it). Same URL policy, robots, politeness, retries and extraction on every path; each
    result's `rendered_by` says which path produced it. `http` cannot take screenshots."""
    session: SessionKey | None = None
    """Isolation key: requests with the same `session` may share one browser context (cookies,
    storage, cache) on purpose, also at the same time on one worker; without it a request gets
    a context of its own that no other request ever sees."""
    only_main_content: bool = False
    """Markdown, text and `json` leave out what is not the page's main content: `nav`,
    `aside`, a `header` or `footer` outside an article or section, the roles navigation,
    banner, contentinfo, complementary and dialog, and cookie or consent banners (an id, class
    or `aria-label` naming cookie, consent or gdpr)."""
    include_tags: tuple[CssSelector, ...] = Field(default=(), max_length=MAX_SHAPING_SELECTORS)
    """CSS selectors: when given, markdown, text and `json` are made of only the elements
    they match (outermost first, in document order)."""
    exclude_tags: tuple[CssSelector, ...] = Field(default=(), max_length=MAX_SHAPING_SELECTORS)
    """CSS selectors of elements left out of markdown, text and `json`."""
    extract: ExtractSchema | None = None
    """A selector schema read from every page into the result's `json` (no format needed)."""
    headers: Headers = Field(default_factory=dict)
    """Extra HTTP headers sent with the page's requests (both paths): by default only to the
    page's own origin (its document, and its subresources of that origin) and to its
    redirects on the same site; see `headers_scope`. Hop-by-hop headers (`Connection`,
    `Keep-Alive`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`, any `Proxy-*`) and `Host`
    are rejected."""
    headers_scope: HeadersScope = "origin"
    """Where `headers` go: `origin` (the page's own origin and same-site redirects; a
    third-party image, script or frame gets none of them) or `all` (every request the page
    makes, whatever its host)."""
    cookies: tuple[Cookie, ...] = Field(default=(), max_length=MAX_COOKIES)
    """Cookies the pages start with, sent where they match (both paths)."""
    user_agent: UserAgent | None = None
    """The `User-Agent` of every request (both paths; in the browser also
    `navigator.userAgent`); it wins over a device's and over one in `headers`."""
    locale: Locale | None = None
    """The browser's language (`navigator.language`, `Accept-Language`), e.g. `de-DE`."""
    timezone: TimeZone | None = None
    """The browser's IANA time zone (`Intl`, `Date`), e.g. `Asia/Tokyo`."""
    geolocation: Geolocation | None = None
    """Where the browser says it is; the geolocation permission is granted to every page."""
    viewport: Viewport | None = None
    """The window's size (default 1280x800; it wins over a device's)."""
    device: DeviceName | None = None
    """A Playwright device descriptor name, e.g. `iPhone 15` or `Pixel 7`: its viewport, user
    agent, pixel ratio, touch and mobile mode. An unknown name is rejected."""
    javascript: bool = True
    """Whether the page's scripts run (in the browser: off, none of them does)."""
    proxy: ProxyOption | None = None
    """An upstream proxy for every page (both paths): an `http://`, `https://` or `socks5://`
    URL (credentials optional; the proxy's own address must pass the URL policy), or the name
    of a pool of `CRAWL_PROXIES` (rotated per connection). Every target is still checked by
    the URL policy first; a proxy that fails or rejects its credentials is `proxy_error`.
    Credentials never appear in logs, results or events."""
    actions: Actions = ()
    """Steps run in order on the loaded page before its content is read (the browser only):
    see docs/contracts.md, "Page actions". At most 50."""
    max_age_ms: int = Field(default=0, ge=0)
    """Answer from the page cache when its entry is younger than this (0: always fetch). An
    older entry with `ETag` or `Last-Modified` is revalidated with a conditional request; a
    304 answers without a render (see docs/cache.md)."""
    store_in_cache: bool = True
    """Store what this request fetches in the page cache (when the answer allows it)."""
    cache_only: bool = False
    """Never contact the site: a page without a usable cache entry ends `cache_miss`."""
    change_tracking: ChangeTracking | None = None
    """Compare each page with its previous observation under `change_tracking.tag`: the result's
    `change_tracking` says `new`, `same`, `changed` or `removed`, and every change is a record
    on `CRAWL_CHANGES_TOPIC` (see docs/changes.md)."""

    _unique_formats = field_validator("formats", "block_resources")(_sorted_unique)

    @model_validator(mode="after")
    def _screenshot_needs_a_browser(self) -> CrawlOptions:
        if self.render == "http" and Format.SCREENSHOT in self.formats:
            raise ValueError("render `http` cannot take screenshots: use `auto` or `browser`")
        if self.render == "http" and Format.PDF in self.formats:
            raise ValueError("render `http` cannot print pages to PDF: use `auto` or `browser`")
        if self.render == "http" and self.actions:
            raise ValueError("render `http` cannot run page actions: use `auto` or `browser`")
        return self


class CrawlSpec(_Untrusted):
    """Follow links from the request's URLs (the seeds): a deep crawl. See docs/job-control.md,
    "Deep crawl", for the order pages are admitted in and how the budget is kept exactly."""

    max_pages: int = Field(ge=1)
    """Pages that get a result (failed ones included), seeds and sitemap pages included; never
    exceeded. At most `CRAWL_MAX_CRAWL_PAGES`."""
    max_depth: int = Field(default=1, ge=0, le=MAX_CRAWL_DEPTH)
    """Links followed from a seed: 0 crawls only the seeds (and sitemap pages)."""
    scope: Literal["host", "domain", "prefix"] = "host"
    """Which discovered URLs are followed: `host` the host name of a seed, `domain` the
    registrable domain of a seed (Public Suffix List), `prefix` the seed's directory."""
    include: tuple[str, ...] = ()
    """Regular expressions searched in the normalised URL; when given, a discovered URL is
    followed only if one matches. At most 32, each at most 512 characters."""
    exclude: tuple[str, ...] = ()
    """Regular expressions searched in the normalised URL; a discovered URL any of them
    matches is not followed."""
    sitemap: bool = False
    """Also seed from the sitemaps of the seeds' sites (robots.txt `Sitemap:` lines and
    `/sitemap.xml`)."""
    respect_nofollow: bool = True
    """Do not follow links marked `rel="nofollow"`."""
    ignore_query: bool = False
    """Drop the query of discovered URLs: `/a?x=1` and `/a?x=2` are the page `/a`."""
    follow_canonical: bool = False
    """Treat a page's `<link rel="canonical">` as seen: a link to it is not crawled again."""
    delay_ms: int = Field(default=0, ge=0, le=60_000)
    """Least time between the starts of two pages of one host in this crawl."""

    @field_validator("include", "exclude")
    @classmethod
    def _compile(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:

        compile_patterns(patterns)
        return patterns

    @field_validator("max_pages")
    @classmethod
    def _within_ceiling(cls, max_pages: int, info: ValidationInfo) -> int:
        context = info.context if isinstance(info.context, dict) else {}
        ceiling = int(context.get("max_crawl_pages", DEFAULT_MAX_CRAWL_PAGES))
        if max_pages > ceiling:
            raise ValueError(f"at most {ceiling} pages per crawl, got {max_pages}")
        return max_pages


class CrawlRequest(_Untrusted):
    """A crawl request, produced by users to the requests topic, keyed by `request_id`."""

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: RequestId
    """Chosen by the producer; 1-128 characters of `[A-Za-z0-9._:-]`."""
    urls: list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_URL_LENGTH)]] = Field(
        min_length=1
    )
    """Absolute http(s) URLs. Duplicates are crawled once. At most `CRAWL_MAX_URLS_PER_REQUEST`."""
    options: CrawlOptions = CrawlOptions()
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Opaque to the service; echoed as `request_metadata` on every result and event."""
    expires_at: Timestamp | None = None
    """A run that starts after this instant crawls nothing and ends with `expired`."""
    crawl: CrawlSpec | None = None
    """Follow links from `urls` (a deep crawl); absent: crawl exactly `urls`."""

    @field_validator("urls")
    @classmethod
    def _check_urls(cls, urls: list[str], info: ValidationInfo) -> list[str]:
        context = info.context if isinstance(info.context, dict) else {}
        limit = int(context.get("max_urls", DEFAULT_MAX_URLS))
        if len(urls) > limit:
            raise ValueError(f"at most {limit} URLs per request, got {len(urls)}")
        if not context.get("lenient_schemes", False):
            for url in urls:
                scheme = urlsplit(url).scheme.lower()
                if scheme not in ALLOWED_SCHEMES:
                    raise ValueError(f"only http and https URLs are crawled, got {url!r}")
        return list(dict.fromkeys(urls))


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


class PageResult(BaseModel):
    """One page of a request, written by workers to the results topic, keyed by request_id.

    A result larger than the producer's message limit travels as ordered chunks of its JSON
    (see docs/contracts.md, "Large results"); `crawlstream.client` reassembles them.
    """

    model_config = ConfigDict(frozen=True, validate_by_name=True, serialize_by_alias=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: str
    result_id: str
    """sha256(request_id + newline + url), first 32 hex digits: equal across redeliveries."""
    run_id: str
    """The run that dispatched this page (a redelivery starts a new run; a page an earlier
    run dispatched and a fetcher answered after a coordinator's failover keeps that run's
    id: count results by `result_id`, not by run)."""
    url: str
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


class EventType(StrEnum):
    ACCEPTED = "accepted"
    PAGE_SUCCEEDED = "page_succeeded"
    PAGE_FAILED = "page_failed"
    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


TERMINAL_EVENTS: Final = frozenset(
    {
        EventType.COMPLETED,
        EventType.FAILED,
        EventType.REJECTED,
        EventType.CANCELLED,
        EventType.EXPIRED,
    }
)


class ProgressEvent(BaseModel):
    """Progress of one run of a request, written to the progress topic, keyed by request_id."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: str
    run_id: str
    seq: int = Field(ge=0)
    """0, 1, 2, ... within a run, without gaps."""
    type: EventType
    total: int = Field(ge=0)
    """Pages the run will give a result for; a deep crawl's grows as URLs are admitted."""
    succeeded: int = Field(ge=0)
    failed: int = Field(ge=0)
    cancelled: int = Field(default=0, ge=0)
    """Pages that got a `cancelled` result (not counted in `failed`); at the terminal event
    succeeded + failed + cancelled is the number of results of the run."""
    at: Timestamp
    worker: str
    """The coordinator (`CRAWL_WORKER_NAME`) of the run: it sends every event of the run."""
    detail: str | None = None
    url: str | None = None
    """The page, on page events."""
    result_id: str | None = None
    """The page's result, on page events."""
    request_metadata: dict[str, JsonValue] = Field(default_factory=dict)
    source: RecordSource | None = None
    """The request record this run answers (null only from workers before this field)."""
    discovered: int | None = None
    """Deep crawls: unique URLs in scope known so far (admitted or not); null otherwise."""

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_EVENTS


MAX_REASON_CHARS: Final = 500
"""Longest `reason` a control message may carry (it is echoed in the terminal event)."""


class CancelControl(_Untrusted):
    """Stop a request: running pages are closed, the others get `cancelled` results."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["cancel"] = "cancel"
    request_id: RequestId
    reason: Annotated[str, StringConstraints(max_length=MAX_REASON_CHARS)] | None = None
    """Short, human-readable; echoed in the `detail` of the terminal `cancelled` event."""
    at: Timestamp = Field(default_factory=utc_now)
    """When the cancel was issued; it is remembered for `CRAWL_CANCEL_RETENTION` from then."""


class ControlMessage(RootModel[Annotated[CancelControl, Field(discriminator="type")]]):
    """A message of the compacted control topic, keyed by request_id. A discriminated union
    on `type` (only `cancel` so far): a reader skips kinds it does not know."""


class FrontierRecord(BaseModel):
    """A deep crawl's durable progress, written by the job's owner to the frontier topic,
    keyed by request_id: the sitemap it read, and each finished page's candidate links. The
    next owner of the job replays them (see docs/job-control.md, "Deep crawl"). A record larger than
    one message travels as ordered chunks, as large results do."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: str
    source: RecordSource
    """The request record of the job: records of another submission that reused the
    request_id are not this job's."""
    kind: Literal["sitemap", "page", "dispatched"]
    url: str | None = None
    """The page (as the run named it: normalised in a deep crawl), on `page` records."""
    outcome: Literal["succeeded", "failed", "cancelled"] | None = None
    """The page's result, on `page` records (written by the fetcher that rendered it, only
    after the result was acknowledged)."""
    links: tuple[str, ...] = ()
    """`page`: the page's links a deep crawl may follow (document order; the coordinator
    keeps the candidates: normalised, in scope); `sitemap`: the sitemap's pages the budget
    can admit (normalised, in scope, new, in order; at most `max_pages` less the seeds);
    `dispatched`: pages the coordinator put on the page topic (acknowledged), whose
    `page` records a next coordinator waits for instead of dispatching them again."""
    run_id: str | None = None
    """The run whose page task this record answers (`page`), or that dispatched (`dispatched`)."""
    error_code: str | None = None
    """`page`: the error code of a failed page."""
    left_out: int = Field(default=0, ge=0)
    """`sitemap`: unique in-scope URLs the sitemap listed beyond the budget (not admitted)."""
    beyond: tuple[str, ...] = ()
    """`sitemap`: the first 5,000 of those URLs (normalised, in order), never admitted: for
    what lists a site's URLs without crawling them (the gateway's `map`)."""
    canonical: str | None = None
    """The page's canonical URL (normalised), when the crawl merges canonicals."""


class FollowLinks(BaseModel):
    """A deep-crawl page task asks for the page's links (it is below `max_depth`)."""

    model_config = ConfigDict(frozen=True)

    respect_nofollow: bool = True


class PageTask(BaseModel):
    """One page to render, on the page topic, keyed by the page's host (or registered
    domain): written by the coordinator of its run, read by the fetcher that owns the host.

    The fetcher answers with the page's `PageResult` (results topic) and then a `page`
    `FrontierRecord` (frontier topic), both keyed by request_id; its offset commits only
    after both are acknowledged."""

    model_config = ConfigDict(frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    request_id: str
    run_id: str
    url: str
    options: CrawlOptions
    source: RecordSource
    """The request record of the run."""
    request_metadata: dict[str, JsonValue] = Field(default_factory=dict)
    depth: int = Field(default=0, ge=0)
    parent_url: str | None = None
    follow: FollowLinks | None = None
    """Set on deep-crawl pages below `max_depth`: the fetcher returns the page's links."""
    delay_ms: int = Field(default=0, ge=0)
    """Pacing of this run's pages of one host (`crawl.delay_ms`), kept by the fetcher."""
    deadline_at: Timestamp | None = None
    """When the run's `deadline_ms` runs out: the page stops there (`deadline`)."""
    priority: int = 0
    """Order of the run at its coordinator (lower first): slots go to older runs first."""
    last: bool = False
    """No page of this run is dispatched after this one (a list crawl's last): the fetcher
    hands the run's browser context back as soon as its pages there are done."""


def dump(message: BaseModel) -> bytes:
    """The wire form of a message: compact JSON in UTF-8."""
    return message.model_dump_json(exclude_none=False).encode()


def dump_request(request: CrawlRequest) -> bytes:
    """A request's wire form without the fields at their defaults (and `schema_version`
    always): a request that uses no option added in a later version is accepted by the
    workers of an earlier one, which reject unknown fields (a rolling upgrade)."""
    document = {"schema_version": SCHEMA_VERSION} | request.model_dump(
        mode="json", exclude_defaults=True
    )
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


MESSAGE_MODELS: Final[dict[str, type[BaseModel]]] = {
    "CrawlRequest": CrawlRequest,
    "PageResult": PageResult,
    "ProgressEvent": ProgressEvent,
    "ControlMessage": ControlMessage,
    "FrontierRecord": FrontierRecord,
    "PageTask": PageTask,
}


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(mode="validation")
