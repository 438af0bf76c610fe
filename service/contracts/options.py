"""What a producer asks: `CrawlOptions` (every per-page option), `CrawlSpec` (a deep crawl)
and `CrawlRequest` (the record on the requests topic)."""

from __future__ import annotations

from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from service.contracts.base import (
    ALLOWED_SCHEMES,
    DEFAULT_FORMATS,
    DEFAULT_MAX_CRAWL_PAGES,
    DEFAULT_MAX_URLS,
    MAX_CRAWL_DEPTH,
    MAX_SHAPING_SELECTORS,
    MAX_URL_LENGTH,
    SCHEMA_VERSION,
    CssSelector,
    ExtractSchema,
    Format,
    RequestId,
    ResourceType,
    SessionKey,
    Timestamp,
    _sorted_unique,
    _Untrusted,
)
from service.contracts_actions import Actions
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
from service.selectors import MAX_SELECTOR_CHARS

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
    third-party image, script or frame gets none of them, nor in the browser a redirect's
    next hop or the page's media and event streams) or `all` (every request the page makes,
    whatever its host)."""
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
    skip_tls_verification: bool = False
    """Fetch the pages without verifying their TLS certificates (self-signed, expired, another
    host's): both paths. Only a worker whose `CRAWL_ALLOW_INSECURE_TLS` is on takes it;
    others reject the request `invalid_request`. Such a page neither reads nor fills the page
    cache, and its browser context is never shared with a verifying request. robots.txt is
    still fetched with verification (one that does not verify counts as unavailable)."""
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
