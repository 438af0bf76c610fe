"""The test site's sitemap: `/sitemap.xml` lists `/page/0` … `/page/49999`, the 50,000 URLs
the sitemap protocol allows in one file (about 2.9 MB), every one a page the site serves.
robots.txt names no sitemap, so a deep crawl with `sitemap: true` reads this one."""

from __future__ import annotations

from aiohttp import web

SITEMAP_URLS = 50_000
"""Pages `/sitemap.xml` lists: the protocol's maximum for one sitemap file."""


def sitemap_xml(origin: str, count: int = SITEMAP_URLS) -> str:
    """A `<urlset>` of `origin`'s `/page/{n}` for n below `count`, in order."""
    entries = "".join(f"<url><loc>{origin}/page/{n}</loc></url>\n" for n in range(count))
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{entries}</urlset>\n"
    )


async def sitemap(request: web.Request) -> web.Response:
    body = sitemap_xml(f"{request.scheme}://{request.host}")
    return web.Response(text=body, content_type="application/xml")


ROUTES = [web.get("/sitemap.xml", sitemap)]
