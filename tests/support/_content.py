"""Test-site pages for the content options: a page with everything around its article, a
product list with structured data, generated PDFs (also behind a redirect) and a bot
challenge page."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Final

from _params import query_int
from aiohttp import web
from fpdf import FPDF

ARTICLE_WORDS: Final = "Kettles boil water by conduction and convection."
"""A sentence only the article holds."""

AROUND_ARTICLE: Final = {
    "nav": "Menu link to elsewhere",
    "header": "Site banner heading",
    "aside": "Sidebar related reading",
    "footer": "Footer copyright notice",
    "cookie": "We use cookies to improve",
    "dialog": "Subscribe to the newsletter",
}
"""What surrounds the article, by part: each phrase is in that part only."""

ARTICLE_PAGE: Final = f"""<!doctype html><html lang="en"><head><title>Kettle article</title>
</head><body>
<header><h1>{AROUND_ARTICLE["header"]}</h1>
<nav><a href="/content/other">{AROUND_ARTICLE["nav"]}</a></nav></header>
<div id="cookie-notice" class="banner">{AROUND_ARTICLE["cookie"]} <button>OK</button></div>
<aside class="sidebar"><h2>{AROUND_ARTICLE["aside"]}</h2></aside>
<main><article><h1>How kettles work</h1><p>{ARTICLE_WORDS}</p>
<p class="promo">Buy our kettle today</p><section class="comments">Reader comments here</section>
</article></main>
<div role="dialog">{AROUND_ARTICLE["dialog"]}</div>
<footer><p>{AROUND_ARTICLE["footer"]}</p></footer>
</body></html>"""

PRODUCTS: Final = (
    {"title": "Steel kettle", "href": "/shop/kettle", "price": "$1,299.50", "tags": ["steel"]},
    {"title": "Blue mug", "href": "/shop/mug", "price": "12.00", "tags": ["blue", "ceramic"]},
    {"title": "Teapot", "href": "/shop/teapot", "price": "€ 30", "tags": []},
)

JSON_LD: Final = {
    "@context": "https://schema.org",
    "@type": "ItemList",
    "name": "Kitchen shop",
    "numberOfItems": len(PRODUCTS),
}

OPEN_GRAPH: Final = {"og:title": "Kitchen shop", "og:type": "website", "og:image": "/og.png"}


def _product(item: dict[str, object]) -> str:
    tags = "".join(f'<span class="tag">{tag}</span>' for tag in item["tags"])  # type: ignore[attr-defined]
    return (
        f'<li class="product"><h2>{item["title"]}</h2><a href="{item["href"]}">details</a>'
        f'<span class="price">{item["price"]}</span>{tags}'
        f'<div class="seller"><span class="name">Shop {item["title"]}</span></div></li>'
    )


PRODUCT_PAGE: Final = f"""<!doctype html><html><head><title>Kitchen shop</title>
{"".join(f'<meta property="{k}" content="{v}">' for k, v in OPEN_GRAPH.items())}
<script type="application/ld+json">{json.dumps(JSON_LD)}</script></head><body>
<div itemscope itemtype="https://schema.org/Product"><span itemprop="name">Steel kettle</span>
<span itemprop="sku">K-1</span></div>
<ul class="products">{"".join(_product(item) for item in PRODUCTS)}</ul></body></html>"""

CHALLENGE_PAGE: Final = """<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta name="robots" content="noindex,nofollow"></head><body>
<div class="main-wrapper"><h1>www.example.com</h1>
<p id="challenge-error-title">Enable JavaScript and cookies to continue</p></div>
<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1?ray=8f"></script>
</body></html>"""

PDF_TITLE: Final = "Kettle manual"
PDF_AUTHOR: Final = "Test Site"


def pdf_page_text(number: int, pages: int) -> str:
    """The text of page `number` of the generated PDF of `pages` pages."""
    return f"Manual page {number} of {pages}."


@lru_cache(maxsize=16)
def pdf_bytes(pages: int) -> bytes:
    """A PDF of `pages` pages, each saying which it is (one line each)."""
    document = FPDF()
    document.set_title(PDF_TITLE)
    document.set_author(PDF_AUTHOR)
    document.set_font("helvetica", size=12)
    for number in range(1, pages + 1):
        document.add_page()
        document.cell(0, 10, pdf_page_text(number, pages))
    return bytes(document.output())


async def article(_: web.Request) -> web.Response:
    return web.Response(text=ARTICLE_PAGE, content_type="text/html")


async def products(_: web.Request) -> web.Response:
    return web.Response(text=PRODUCT_PAGE, content_type="text/html")


async def pdf(request: web.Request) -> web.Response:
    pages = query_int(request, "pages", 3, 1, 500)
    return web.Response(body=pdf_bytes(pages), content_type="application/pdf")


async def pdf_redirect(request: web.Request) -> web.Response:
    pages = query_int(request, "pages", 3, 1, 500)
    raise web.HTTPFound(f"/content/manual.pdf?pages={pages}")


async def challenge(_: web.Request) -> web.Response:
    return web.Response(
        text=CHALLENGE_PAGE,
        status=503,
        content_type="text/html",
        headers={"Retry-After": "0", "Cache-Control": "no-store"},
    )


ROUTES = (
    web.get("/content/article", article),
    web.get("/content/products", products),
    web.get("/content/manual.pdf", pdf),
    web.get("/content/manual-moved", pdf_redirect),
    web.get("/content/challenge/{key}", challenge),
)
"""The content-option routes."""
