"""Pages whose real content appears only after their scripts run, on the site's own host.

Each `/app/{kind}/{n}` page carries the phrase `marker(kind, n)` only in the content its
script inserts, so a result whose Markdown lacks it was taken from the static HTML. Kinds:

- `shell`: an app shell, `<div id="root"></div>` filled by script (React, Vue, Next, ...);
- `noscript`: a `<noscript>` asking to enable JavaScript, the content in a plain `<div>`;
- `boilerplate`: static header, navigation and footer text around an empty `<main>`;
- `widget`: static header and footer text, the story in a `<div>` filled by script.

`/app/static/{n}` is the control: a long static article with an analytics-style script that
changes nothing a reader sees. `/page/{n}` pages of the same host are static too.
"""

from __future__ import annotations

import json
import random
from typing import Final

from _html import document, escape, filler, script_literal
from _params import path_int
from aiohttp import web

JS_KINDS: Final = ("shell", "noscript", "boilerplate", "widget")
"""Kinds of script-rendered page, see the module docstring."""

APP_MAX: Final = 10**6
"""Highest `{n}` served."""

STATIC_FILLER_BYTES: Final = 12_000
"""Article text of `/app/static/{n}`."""

NAV: Final = (
    "<header><p>Crawlstream Daily: news about crawling, streams and the people who run them."
    "</p><nav><a href='/'>Home</a> <a href='/page/1'>Archive</a> <a href='/page/2'>About us</a>"
    " <a href='/page/3'>Contact</a></nav></header>"
)
FOOTER: Final = (
    "<footer><p>Copyright Crawlstream Daily. All rights reserved. Subscribe to our newsletter"
    " for weekly updates. Terms of use. Privacy policy. Cookie settings.</p></footer>"
)


def marker(kind: str, n: int) -> str:
    """The phrase only the script-inserted content of `/app/{kind}/{n}` carries."""
    return f"Script-rendered {kind} story {n}"


def _story(kind: str, n: int) -> dict[str, object]:
    rng = random.Random(f"{kind}-{n}")
    paragraphs = [marker(kind, n) + "."] + [
        " ".join(rng.choices(("render", "script", "stream", "page", "story"), k=12)) + "."
        for _ in range(3)
    ]
    return {"heading": f"Story {n}", "paragraphs": paragraphs, "link": f"/page/{n + 1}"}


def _render_script(container: str, story: dict[str, object]) -> str:
    """Inline code that builds the story into `container` (a CSS selector) as it runs."""
    return (
        "<script>\n(function () {\n"
        f"  const story = JSON.parse({script_literal(json.dumps(story))});\n"
        f"  const root = document.querySelector({script_literal(container)});\n"
        "  const h = document.createElement('h2'); h.textContent = story.heading;\n"
        "  root.appendChild(h);\n"
        "  for (const text of story.paragraphs) {\n"
        "    const p = document.createElement('p'); p.textContent = text; root.appendChild(p);\n"
        "  }\n"
        "  const a = document.createElement('a'); a.href = story.link;\n"
        "  a.textContent = 'Next story'; root.appendChild(a);\n"
        "})();\n</script>"
    )


def js_page(kind: str, n: int) -> str:
    """`/app/{kind}/{n}`: see the module docstring."""
    story = _story(kind, n)
    title = f"{kind.title()} app {n}"
    if kind == "shell":
        body = '<div id="root"></div>\n' + _render_script("#root", story)
    elif kind == "noscript":
        body = (
            "<noscript>You need to enable JavaScript to run this app.</noscript>\n"
            '<div class="mount"></div>\n' + _render_script(".mount", story)
        )
    elif kind == "boilerplate":
        body = f'{NAV}\n<main><article id="story"></article></main>\n{FOOTER}\n'
        body += _render_script("#story", story)
    elif kind == "widget":
        body = f'{NAV}\n<div class="story-body"></div>\n{FOOTER}\n'
        body += _render_script(".story-body", story)
    else:
        raise web.HTTPNotFound
    return document(title=title, body=body)


def static_page(n: int) -> str:
    """`/app/static/{n}`: a long article that needs no script, with an analytics snippet."""
    rng = random.Random(f"static-{n}")
    analytics = (
        "<script>window.dataLayer = window.dataLayer || [];"
        " window.dataLayer.push({event: 'pageview'});</script>"
    )
    body = (
        f"{NAV}\n<main><h1>Static story {n}</h1>\n{filler(rng, STATIC_FILLER_BYTES)}</main>\n"
        f"{FOOTER}\n{analytics}"
    )
    return document(title=f"Static story {n}", body=body)


async def app_page(request: web.Request) -> web.Response:
    kind = request.match_info["kind"]
    n = path_int(request, "n", 0, APP_MAX)
    if kind == "static":
        text = static_page(n)
    elif kind in JS_KINDS:
        text = js_page(kind, n)
    else:
        raise web.HTTPNotFound(text=f"no app kind {escape(kind)}")
    return web.Response(text=text, content_type="text/html")


async def plain_text(request: web.Request) -> web.Response:
    return web.Response(text="Plain text answer.\nSecond line.\n", content_type="text/plain")


async def binary(request: web.Request) -> web.Response:
    return web.Response(body=b"%PDF-1.4\n" + bytes(range(256)), content_type="application/pdf")


ROUTES = (
    web.get(r"/app/{kind}/{n:\d+}", app_page),
    web.get("/text/plain", plain_text),
    web.get("/binary/pdf", binary),
)
"""The script-rendered corpus and content-type routes."""
