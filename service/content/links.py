"""URLs of a parsed page: made absolute the way a browser does, http(s) only, no fragments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urljoin, urlsplit

from service.contracts import ALLOWED_SCHEMES, MAX_URL_LENGTH, Links
from service.net.hosts import browser_cleaned_url

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser

LINK_SELECTOR: Final = "a[href], area[href]"
"""Elements whose `href` is a link a user can follow."""

_BASE_SELECTOR: Final = "base[href]"

_ABSOLUTE: Final = ("http://", "https://")
"""Prefixes of URLs that need no resolving."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AbsoluteUrl:
    """An absolute http(s) URL without fragment, and its lower-cased host name."""

    url: str
    host: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UrlResolver:
    """Resolves the URLs of one document against its base, keeping http(s) URLs only."""

    base: str
    origin: str | None = None
    """`scheme://authority` of an http(s) base: a path-absolute link just appends to it."""
    host: str | None = None

    @classmethod
    def for_base(cls, base: str) -> UrlResolver:
        parsed = _parsed(base)
        if parsed is None:
            return cls(base=base)
        parts = urlsplit(parsed.url)
        return cls(base=base, origin=f"{parts.scheme}://{parts.netloc}", host=parsed.host)

    def resolve(self, href: str) -> AbsoluteUrl | None:
        """`href` made absolute; None for fragments, other schemes and broken URLs."""
        cleaned = browser_cleaned_url(href)
        if not cleaned or cleaned.startswith("#"):
            return None
        if self.origin is not None and self.host is not None and _is_plain_path(cleaned):
            url = self.origin + cleaned.partition("#")[0]
            return AbsoluteUrl(url=url, host=self.host) if len(url) <= MAX_URL_LENGTH else None
        if cleaned.startswith(_ABSOLUTE):
            return _parsed(cleaned)
        try:
            return _parsed(urljoin(self.base, cleaned))
        except ValueError:
            return None


def document_base(tree: LexborHTMLParser, page_url: str) -> UrlResolver:
    """Resolves against `<base href>` when it is usable, else against the page's URL."""
    page = UrlResolver.for_base(page_url)
    node = tree.css_first(_BASE_SELECTOR)
    href = node.attributes.get("href") if node is not None else None
    base = page.resolve(href) if href else None
    return UrlResolver.for_base(base.url) if base is not None else page


def links_of(tree: LexborHTMLParser, *, page_url: str, resolver: UrlResolver) -> Links:
    """The page's links, split by whether they point at the page's own host."""
    page_host = UrlResolver.for_base(page_url).host
    resolved: dict[str, AbsoluteUrl | None] = {}
    internal: dict[str, None] = {}
    external: dict[str, None] = {}
    for node in tree.css(LINK_SELECTOR):
        href = node.attributes.get("href") or ""
        if href not in resolved:
            resolved[href] = resolver.resolve(href)
        link = resolved[href]
        if link is not None:
            (internal if link.host == page_host else external)[link.url] = None
    return Links(internal=list(internal), external=list(external))


def followable_links(
    tree: LexborHTMLParser, *, resolver: UrlResolver, respect_nofollow: bool
) -> tuple[str, ...]:
    """The page's links a crawler may follow, in document order, each once: with
    `respect_nofollow`, none when `<meta name="robots">` says `nofollow` (or `none`), and
    no link whose `rel` has `nofollow`."""
    if respect_nofollow and _robots_nofollow(tree):
        return ()
    found: dict[str, None] = {}
    for node in tree.css(LINK_SELECTOR):
        attributes = node.attributes
        if respect_nofollow and "nofollow" in (attributes.get("rel") or "").lower().split():
            continue
        link = resolver.resolve(attributes.get("href") or "")
        if link is not None:
            found[link.url] = None
    return tuple(found)


def _robots_nofollow(tree: LexborHTMLParser) -> bool:
    for node in tree.css("meta[name][content]"):
        attributes = node.attributes
        if (attributes.get("name") or "").strip().lower() in {"robots", "crawlstream"}:
            words = (attributes.get("content") or "").lower().replace(",", " ").split()
            if "nofollow" in words or "none" in words:
                return True
    return False


def _parsed(url_with_fragment: str) -> AbsoluteUrl | None:
    url = url_with_fragment.partition("#")[0]
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # reading the port validates it
    except ValueError:
        return None
    if parts.scheme not in ALLOWED_SCHEMES or not host or len(url) > MAX_URL_LENGTH:
        return None
    return AbsoluteUrl(url=url, host=host)


def _is_plain_path(href: str) -> bool:
    """A path-absolute reference without dot segments: `/a/b?c`, not `//host` or `/a/../b`."""
    return href.startswith("/") and not href.startswith("//") and "/." not in href
