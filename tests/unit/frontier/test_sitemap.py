"""Where a site's sitemaps are and what they list."""

from __future__ import annotations

from service.frontier.sitemap import read_sitemap, sitemap_urls, sitemaps_in_robots
from service.http.robots import RobotsFile

URLSET = """<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://a.test/one</loc></url>
  <url><loc> https://a.test/two?x=1&amp;y=2 </loc><lastmod>2026-01-01</lastmod></url>
</urlset>"""

INDEX = """<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://a.test/pages.xml</loc></sitemap>
</sitemapindex>"""


def test_a_urlset_lists_its_pages_in_order_with_entities_decoded() -> None:
    assert read_sitemap(URLSET) == (["https://a.test/one", "https://a.test/two?x=1&y=2"], [])


def test_an_index_lists_sitemaps_not_pages() -> None:
    assert read_sitemap(INDEX) == ([], ["https://a.test/pages.xml"])


def test_robots_sitemap_lines_in_any_case() -> None:
    text = "User-agent: *\nDisallow: /x\nSitemap: https://a.test/s1.xml\nsitemap:https://a.test/s2.xml\n"
    assert sitemaps_in_robots(text) == ["https://a.test/s1.xml", "https://a.test/s2.xml"]


class FakeSite:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.asked: list[str] = []

    async def fetch(self, url: str, *, max_bytes: int = 512 * 1024) -> RobotsFile:
        self.asked.append(url)
        if url in self.files:
            return RobotsFile(status=200, text=self.files[url][:max_bytes])
        return RobotsFile(status=404)


async def test_robots_names_an_index_which_is_followed() -> None:
    site = FakeSite(
        {
            "https://a.test/robots.txt": "Sitemap: https://a.test/index.xml",
            "https://a.test/index.xml": INDEX,
            "https://a.test/pages.xml": URLSET,
        }
    )
    urls = await sitemap_urls(site, ["https://a.test/", "https://a.test/other"])
    assert urls == ["https://a.test/one", "https://a.test/two?x=1&y=2"]
    assert site.asked.count("https://a.test/robots.txt") == 1  # one origin, asked once


async def test_without_a_sitemap_line_the_default_place_is_read() -> None:
    site = FakeSite({"http://b.test:8080/sitemap.xml": URLSET})
    assert len(await sitemap_urls(site, ["http://b.test:8080/start"])) == 2
