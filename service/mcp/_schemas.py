"""The tools' input schemas, with Firecrawl's argument names (firecrawl-mcp's), and the
arguments of this server's own: `offset` and `cursor`, the continuations of a cut answer."""

from __future__ import annotations

from typing import Any, Final

Schema = dict[str, Any]


def _of(kind: str, description: str, **more: Any) -> Schema:  # noqa: ANN401
    return {"type": kind, "description": description, **more}


_STRINGS: Final = {"type": "array", "items": {"type": "string"}}

SCRAPE_OPTIONS: Final[dict[str, Schema]] = {
    "formats": {
        "type": "array",
        "description": (
            "What to return: markdown (default), html, rawHtml, links, screenshot, "
            "structuredData (JSON-LD, microdata, Open Graph), json (with a CSS selector "
            'schema, {"type": "json", "schema": {"base_selector", "fields"}}: no LLM here).'
        ),
        "items": {"anyOf": [{"type": "string"}, {"type": "object"}]},
    },
    "onlyMainContent": _of(
        "boolean", "Main content only, without nav/header/footer (default true)."
    ),
    "includeTags": _STRINGS | {"description": "CSS selectors of the only elements to keep."},
    "excludeTags": _STRINGS | {"description": "CSS selectors of elements to drop."},
    "waitFor": _of("number", "Milliseconds to wait after the page loads, before reading it."),
    "timeout": _of("number", "Milliseconds the page may take at most."),
    "actions": {
        "type": "array",
        "description": (
            "Browser actions before the page is read: wait, click, write, press, scroll, "
            "screenshot, scrape, executeJavascript (Firecrawl's action objects)."
        ),
        "items": {"type": "object"},
    },
    "mobile": _of("boolean", "Render as a mobile device."),
    "headers": _of("object", "HTTP headers sent with the page request."),
    "location": _of("object", "{country, languages}: the languages set the Accept-Language."),
    "removeBase64Images": _of("boolean", "Replace base64 images in markdown by a placeholder."),
    "skipTlsVerification": _of(
        "boolean",
        "Skip certificate checks; applied only where the cluster allows it, else a warning.",
    ),
    "parsers": {"type": "array", "description": 'PDF text: ["pdf"] (the default).'},
    "proxy": _of("string", "basic or auto (a direct fetch), or a proxy pool of the cluster."),
    "maxAge": _of("number", "Accepted for compatibility; every scrape here is live."),
}
"""Firecrawl's scrape options that a scrape, a batch and a crawl's `scrapeOptions` take."""

OFFSET: Final = _of(
    "integer",
    "Character to start the answer at, for the rest of an answer that was cut (its last line "
    "gives the value). Default 0.",
    minimum=0,
)

CURSOR: Final = _of(
    "string", "The `next` of the previous answer, for the documents after it. Omit at first."
)


def _object(properties: dict[str, Schema], required: tuple[str, ...]) -> Schema:
    return {"type": "object", "properties": properties, "required": list(required)}


SCRAPE: Final = _object(
    {"url": _of("string", "The page's URL."), **SCRAPE_OPTIONS, "offset": OFFSET}, ("url",)
)

BATCH: Final = _object(
    {
        "urls": _STRINGS | {"description": "The pages' URLs."},
        "options": _object(SCRAPE_OPTIONS, ()) | {"description": "Scrape options for every URL."},
    },
    ("urls",),
)

MAP: Final = _object(
    {
        "url": _of("string", "The site's URL (its pages are listed from it)."),
        "search": _of("string", "Only URLs containing this text, most relevant first."),
        "sitemap": _of(
            "string", "include (default), skip or only.", enum=["include", "skip", "only"]
        ),
        "includeSubdomains": _of("boolean", "Also list URLs of the site's subdomains."),
        "ignoreQueryParameters": _of("boolean", "Treat URLs differing in the query as one."),
        "limit": _of("integer", "At most this many URLs (default 5000).", minimum=1),
        "timeout": _of("number", "Milliseconds the map may take (default 60000)."),
        "offset": OFFSET,
    },
    ("url",),
)

CRAWL: Final = _object(
    {
        "url": _of("string", "Where the crawl starts; only its site is crawled."),
        "includePaths": _STRINGS | {"description": "Regexes of the URL paths to crawl only."},
        "excludePaths": _STRINGS | {"description": "Regexes of URL paths not to crawl."},
        "maxDiscoveryDepth": _of("integer", "Links followed from the start page at most."),
        "limit": _of("integer", "Pages at most (keep it small when you need a few).", minimum=1),
        "sitemap": _of(
            "string", "include (default), skip or only.", enum=["include", "skip", "only"]
        ),
        "allowSubdomains": _of("boolean", "Also crawl the site's subdomains."),
        "crawlEntireDomain": _of("boolean", "Also pages outside the start URL's path."),
        "allowExternalLinks": _of("boolean", "Only false: other sites are not crawled."),
        "ignoreQueryParameters": _of("boolean", "Treat URLs differing in the query as one."),
        "deduplicateSimilarURLs": _of("boolean", "Accepted; URLs are normalised anyway."),
        "delay": _of("number", "Seconds between two pages of the site."),
        "maxConcurrency": _of("integer", "Pages at once (the cluster's per-host limit at least)."),
        "webhook": _of("string", "A URL told of the crawl's events."),
        "webhookHeaders": _of("object", "Headers sent with each webhook call."),
        "scrapeOptions": _object(SCRAPE_OPTIONS, ()) | {"description": "How each page is read."},
    },
    ("url",),
)

JOB_STATUS: Final = _object({"id": _of("string", "The job's id."), "cursor": CURSOR}, ("id",))

JOB_ID: Final = _object({"id": _of("string", "The job's id.")}, ("id",))
