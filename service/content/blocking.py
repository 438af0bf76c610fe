"""Whether an answer is a bot challenge or block page rather than the page: pure, over the
status, the response headers and the parsed document.

Only a refusing status counts (403, 429, 503): a site that serves a CAPTCHA form with 200 is a
page with a form. The marks are those the vendors' own pages carry (the title, a script or
frame from the vendor's challenge host, the widget's element, a header the vendor sets); what
was seen goes into the error message. Nothing here tries to get past a challenge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from selectolax.lexbor import LexborHTMLParser

if TYPE_CHECKING:
    from collections.abc import Mapping

CHALLENGE_STATUSES: Final = frozenset({403, 429, 503})
"""Statuses a challenge or block page comes with."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Vendor:
    """The marks of one vendor's challenge or block pages."""

    name: str
    titles: tuple[str, ...] = ()
    """Lower-case prefixes of the document title."""
    sources: tuple[str, ...] = ()
    """Substrings of a script's or frame's `src` (or a form's `action`)."""
    selectors: tuple[str, ...] = ()
    """Elements only its pages have."""
    texts: tuple[str, ...] = ()
    """Lower-case substrings of the visible text."""
    headers: tuple[tuple[str, str], ...] = ()
    """(lower-case name, lower-case value prefix; empty: any value)."""
    needs: int = 1
    """Marks that must be seen (more for a vendor whose single marks are common words)."""


VENDORS: Final = (
    Vendor(
        name="Cloudflare challenge",
        titles=("just a moment", "attention required! | cloudflare"),
        sources=("/cdn-cgi/challenge-platform/",),
        selectors=("#challenge-form", "#cf-challenge-running", "#challenge-error-title"),
        headers=(("cf-mitigated", "challenge"),),
    ),
    Vendor(
        name="Akamai block page",
        titles=("access denied",),
        texts=("errors.edgesuite.net", "reference #"),
        headers=(("server", "akamaighost"),),
        needs=2,
    ),
    Vendor(
        name="PerimeterX block page",
        sources=("perimeterx.net", "px-cdn.net", "px-captcha"),
        selectors=("#px-captcha",),
    ),
    Vendor(
        name="DataDome block page",
        sources=("captcha-delivery.com", "datadome.co"),
        headers=(("x-datadome", ""), ("server", "datadome")),
    ),
    Vendor(
        name="reCAPTCHA form",
        sources=("google.com/recaptcha/", "recaptcha.net/recaptcha/"),
        selectors=(".g-recaptcha",),
    ),
    Vendor(name="hCaptcha form", sources=("hcaptcha.com",), selectors=(".h-captcha",)),
    Vendor(
        name="Turnstile form",
        sources=("challenges.cloudflare.com/turnstile",),
        selectors=(".cf-turnstile",),
    ),
)

_SOURCE_SELECTOR: Final = "script[src], iframe[src], form[action]"

MAX_MARKS: Final = 3
"""Marks named in the message."""


def challenge_seen(status: int | None, headers: Mapping[str, str], html: str) -> str | None:
    """What marks a refusing answer as a challenge or block page (vendor and marks), or None
    when it is not one. `headers` has lower-case names."""
    if status not in CHALLENGE_STATUSES:
        return None
    page = _Page.of(html)
    for vendor in VENDORS:
        marks = _marks(vendor, page, headers)
        if len(marks) >= vendor.needs:
            return f"{vendor.name} ({'; '.join(marks[:MAX_MARKS])})"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Page:
    tree: LexborHTMLParser
    title: str
    sources: tuple[str, ...]
    text: str

    @classmethod
    def of(cls, html: str) -> _Page:
        tree = LexborHTMLParser(html)
        title_node = tree.css_first("title")
        title = " ".join(title_node.text().split()).lower() if title_node is not None else ""
        sources = tuple(
            (node.attributes.get("src") or node.attributes.get("action") or "").lower()
            for node in tree.css(_SOURCE_SELECTOR)
        )
        body = tree.body
        text = " ".join(body.text().split()).lower() if body is not None else ""
        return cls(tree=tree, title=title, sources=sources, text=text)


def _marks(vendor: Vendor, page: _Page, headers: Mapping[str, str]) -> list[str]:
    marks = [f"title {page.title!r}" for prefix in vendor.titles if page.title.startswith(prefix)]
    marks += [
        f"{source!r} loaded" for source in page.sources if any(s in source for s in vendor.sources)
    ]
    marks += [
        f"element {selector}" for selector in vendor.selectors if page.tree.css_first(selector)
    ]
    marks += [f"text {text!r}" for text in vendor.texts if text in page.text]
    marks += [
        f"header {name}: {headers[name]}"
        for name, prefix in vendor.headers
        if name in headers and headers[name].lower().startswith(prefix)
    ]
    return marks
