"""Pages whose content is cheap to send and costly to read: a selector that backtracks over
nested `div`s, a PDF whose pages share one huge text stream, a page whose `extract` copies
it many times over."""

from __future__ import annotations

import base64
import zlib
from urllib.parse import quote

from _html import document, escape
from _pages import simple_page
from _params import query_int, target_param
from _routes import html
from aiohttp import web

NESTED_DIVS = 80
"""`div`s nested in `/bombs/nested-divs` (about 1 KB)."""

BOMB_SELECTOR = "span div div div div div div div div div"
"""Valid, and exponential in lexbor's matcher over `/bombs/nested-divs` (no `span` to end it)."""

MANY_DIVS_DEPTH = 1_000
"""Nesting of each block of `/bombs/many-divs`."""

DATA_MARKER = "content-of-a-data-url"
"""What `/bombs/to-data-url` navigates to: it must never be in a result."""

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG."""

PDF_PAGES = 100
PDF_STREAM_CHARS = 1_000_000
"""Characters drawn by the one content stream every page of `/bombs/pdf` shares."""


def bomb_pdf(pages: int = PDF_PAGES, chars: int = PDF_STREAM_CHARS) -> bytes:
    """A PDF of `pages` pages whose content streams are one object: `chars` characters of
    text, deflated to a few KB."""
    line = b"(" + b"bomb " * 20 + b") Tj 0 -1 Td\n"
    drawn = b"BT /F1 1 Tf 0 700 Td\n" + line * (chars // 100) + b"ET"
    stream = zlib.compress(drawn, 9)
    kids = " ".join(f"{5 + index} 0 R" for index in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
        b" /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    )
    objects += [page] * pages
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def nested_divs(depth: int = NESTED_DIVS) -> str:
    return "<div>" * depth + "deep" + "</div>" * depth


async def nested(request: web.Request) -> web.Response:
    depth = query_int(request, "depth", NESTED_DIVS, 1, 10_000)
    return html(simple_page("Nested divs", nested_divs(depth)))


async def pdf(request: web.Request) -> web.Response:
    return web.Response(body=bomb_pdf(), content_type="application/pdf")


async def many_divs(request: web.Request) -> web.Response:
    """`blocks` of 1,000 nested `div`s (about 21 KB each): `extract` with base selector `div`
    and a text field copies each block's text once per `div` in it (5 MB a block)."""
    blocks = query_int(request, "blocks", 10, 1, 100)
    block = "<div>0123456789" * MANY_DIVS_DEPTH + "</div>" * MANY_DIVS_DEPTH
    return html(simple_page("Many divs", block * blocks))


async def deep_json_ld(request: web.Request) -> web.Response:
    """A JSON-LD block whose `hasPart` is arrays nested `depth` deep."""
    depth = query_int(request, "depth", 100_000, 1, 1_000_000)
    block = '{"@context": "https://schema.org", "@type": "Thing", "name": "deep", "hasPart": '
    block += "[" * depth + "]" * depth + "}"
    head = f'<script type="application/ld+json">{block}</script>'
    return html(document(title="Deep JSON-LD", head=head, body="<p>deep</p>"))


async def to_data_url(request: web.Request) -> web.Response:
    """A page whose script navigates to a `data:` URL (by location, then by a link click)."""
    content = base64.b64encode(f"{DATA_MARKER} {DATA_MARKER}".encode()).decode()
    script = (
        f"<script>\nconst target = 'data:text/plain;base64,{content}';\n"
        "setTimeout(() => { location.href = target; }, 50);\n"
        "setTimeout(() => { const a = document.createElement('a'); a.href = target;"
        " document.body.append(a); a.click(); }, 100);\n</script>"
    )
    return html(simple_page("To data", "<p>leaving</p>" + script))


async def to_about_blank(request: web.Request) -> web.Response:
    """A page whose script writes the marker into a new `about:blank` document it goes to."""
    script = (
        "<script>\nsetTimeout(() => { location.href = 'about:blank#"
        + DATA_MARKER
        + "'; }, 50);\n</script>"
    )
    return html(simple_page("To about:blank", "<p>leaving</p>" + script))


async def third_party(request: web.Request) -> web.Response:
    """A page that loads an image of its own origin and one from `target` (another host)."""
    target = escape(target_param(request))
    images = f'<img src="/bombs/pixel.png" alt=""><img src="{target}" alt="">'
    return html(simple_page("Third party", images))


async def redirected_image(request: web.Request) -> web.Response:
    """A page whose image of its own origin redirects to `target` (another host)."""
    hop = escape("/hostile/private-redirect?target=" + quote(target_param(request), safe=""))
    images = f'<img src="/bombs/pixel.png" alt=""><img src="{hop}" alt="">'
    return html(simple_page("Redirected image", images))


async def pixel(request: web.Request) -> web.Response:
    return web.Response(body=PIXEL, content_type="image/png")


ROUTES = (
    web.get("/bombs/nested-divs", nested),
    web.get("/bombs/pdf", pdf),
    web.get("/bombs/many-divs", many_divs),
    web.get("/bombs/deep-json-ld", deep_json_ld),
    web.get("/bombs/to-data-url", to_data_url),
    web.get("/bombs/to-about-blank", to_about_blank),
    web.get("/bombs/third-party", third_party),
    web.get("/bombs/redirected-image", redirected_image),
    web.get("/bombs/pixel.png", pixel),
)
"""The bomb routes."""
