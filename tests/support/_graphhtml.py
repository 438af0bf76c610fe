"""The graph site's documents: pages rendered from their specs, the sitemap and robots.txt."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from _html import document, escape, filler, script_literal

if TYPE_CHECKING:
    from _graphspec import Anchor, PageSpec

__all__ = ["render_page", "robots_txt", "sitemap_xml"]

FILLER_CHARS = (1_500, 4_000)
"""Inclusive bounds on a page's filler text, so pages weigh about 2-5 KB."""

SCRIPT_LINK = """<script>
document.addEventListener("DOMContentLoaded", () => {{
  const link = document.createElement("a");
  link.href = {href};
  link.textContent = "Added by script";
  document.body.appendChild(link);
}});
</script>
"""
"""Appends one link to the end of the body once the document is parsed (before `load`)."""


def render_page(spec: PageSpec) -> str:
    """The HTML of a page: its anchors in a `<nav>`, then filler paragraphs."""
    rng = random.Random(spec.seed)
    head = ""
    if spec.base_href is not None:
        head += f'<base href="{escape(spec.base_href)}">\n'
    if spec.script_href is not None:
        head += SCRIPT_LINK.format(href=script_literal(spec.script_href))
    nav = "".join(f"<li>{_anchor(anchor)}</li>\n" for anchor in spec.anchors)
    body = (
        f'<header id="top"><h1>{escape(spec.title)}</h1>\n<nav><ul>\n{nav}</ul></nav></header>\n'
        f"<main>\n{filler(rng, rng.randint(*FILLER_CHARS))}</main>\n"
        "<footer><p>Crawlstream graph site</p></footer>"
    )
    return document(title=spec.title, head=head, body=body)


def sitemap_xml(urls: list[str]) -> str:
    """A `<urlset>` sitemap listing `urls` in order."""
    entries = "".join(f"  <url><loc>{escape(url)}</loc></url>\n" for url in urls)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{entries}</urlset>\n"
    )


def robots_txt(sitemap_url: str) -> str:
    """A robots.txt allowing everything and naming the sitemap."""
    return f"User-agent: *\nAllow: /\n\nSitemap: {sitemap_url}\n"


def _anchor(anchor: Anchor) -> str:
    rel = f' rel="{escape(anchor.rel)}"' if anchor.rel else ""
    return f'<a href="{escape(anchor.href)}"{rel}>{escape(anchor.text)}</a>'
