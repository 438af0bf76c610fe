"""Pages whose content arrives after `load`: what a crawler that reads at `load` gets wrong.

Each `/late/{kind}/{n}` page has a title and a meta description in its static HTML and carries
the phrase `late_marker(kind, n)` only in the content its script inserts. The delay of page
`n` is `LATE_DELAYS_MS[n % len(LATE_DELAYS_MS)]` (100 ms to 2 s). Kinds:

- `timer`: an empty `<div id="root">` filled by a timer that long after DOMContentLoaded;
- `after-load`: a plain `<div>` that a timer started on `load` appends the article to;
- `fetch`: "Loading..." replaced by what a `fetch()` of `/late/data/{n}` returns (the server
  answers after the delay);
- `framework`: a module script that waits for two animation frames and a chain of promises
  over the delay, then mounts its component into an empty `#app`;
- `never`: an empty `#root` whose script fails: the content never appears;
- `clock`: the article is in the static HTML, beside a clock that ticks every 50 ms forever.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Final

from _html import document, escape, script_literal
from _params import path_int
from aiohttp import web

LATE_KINDS: Final = ("timer", "after-load", "fetch", "framework")
"""Kinds whose content arrives late but arrives."""

LATE_DELAYS_MS: Final = (100, 300, 700, 1200, 2000)

LATE_MAX: Final = 10**6


def late_marker(kind: str, n: int) -> str:
    """The phrase only the late content of `/late/{kind}/{n}` carries."""
    return f"Late {kind} article {n}"


def _delay_ms(n: int) -> int:
    return LATE_DELAYS_MS[n % len(LATE_DELAYS_MS)]


def _article(kind: str, n: int) -> dict[str, object]:
    rng = random.Random(f"late-{kind}-{n}")
    paragraphs = [late_marker(kind, n) + "."] + [
        " ".join(rng.choices(("late", "script", "content", "render", "settle"), k=14)) + "."
        for _ in range(4)
    ]
    return {"heading": f"Article {n}", "paragraphs": paragraphs}


_BUILD: Final = (
    "function build(root, story) {\n"
    "  root.textContent = '';\n"
    "  const h = document.createElement('h2'); h.textContent = story.heading;\n"
    "  root.appendChild(h);\n"
    "  for (const text of story.paragraphs) {\n"
    "    const p = document.createElement('p'); p.textContent = text; root.appendChild(p);\n"
    "  }\n"
    "}\n"
)


def _head(kind: str, n: int) -> str:
    return f'<meta name="description" content="{escape(f"The {kind} article number {n}")}">'


def late_page(kind: str, n: int) -> str:
    """`/late/{kind}/{n}`: see the module docstring."""
    story = script_literal(json.dumps(_article(kind, n)))
    delay = _delay_ms(n)
    if kind == "timer":
        body = (
            '<div id="root"></div>\n<script>\n' + _BUILD + "document.addEventListener("
            f"'DOMContentLoaded', () => setTimeout(() => build("
            f"document.getElementById('root'), JSON.parse({story})), {delay}));\n</script>"
        )
    elif kind == "after-load":
        body = (
            '<div class="content"></div>\n<script>\n' + _BUILD + "window.addEventListener("
            f"'load', () => setTimeout(() => build("
            f"document.querySelector('.content'), JSON.parse({story})), {delay}));\n</script>"
        )
    elif kind == "fetch":
        body = (
            '<div id="news">Loading...</div>\n<script>\n' + _BUILD
            + f"fetch('/late/data/{n}').then((r) => r.json())"
            ".then((story) => build(document.getElementById('news'), story));\n</script>"
        )  # fmt: skip
    elif kind == "framework":
        body = (
            '<div id="app"></div>\n<script type="module">\n' + _BUILD
            + "const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));\n"
            + "await frame(); await frame();\n"
            + f"const until = performance.now() + {delay};\n"
            + "while (performance.now() < until) { await frame(); }\n"
            + f"build(document.getElementById('app'), JSON.parse({story}));\n</script>"
        )  # fmt: skip
    elif kind == "never":
        body = '<div id="root"></div>\n<script>\nnotDefinedAnywhere.render();\n</script>'
    elif kind == "clock":
        paragraphs = "".join(f"<p>{escape(str(p))}</p>" for p in _article(kind, n)["paragraphs"])  # type: ignore[attr-defined]
        body = (
            f"<article><h2>Article {n}</h2>{paragraphs}</article>\n<p id='clock'></p>\n<script>"
            "setInterval(() => { document.getElementById('clock').textContent ="
            " new Date().toISOString(); }, 50);</script>"
        )
    else:
        raise web.HTTPNotFound
    return document(title=f"Late {kind} {n}", body=body, head=_head(kind, n))


async def late(request: web.Request) -> web.Response:
    kind = request.match_info["kind"]
    n = path_int(request, "n", 0, LATE_MAX)
    return web.Response(text=late_page(kind, n), content_type="text/html")


async def late_data(request: web.Request) -> web.Response:
    n = path_int(request, "n", 0, LATE_MAX)
    await asyncio.sleep(_delay_ms(n) / 1000)
    return web.json_response(_article("fetch", n))


ROUTES = (
    web.get(r"/late/data/{n:\d+}", late_data),
    web.get(r"/late/{kind}/{n:\d+}", late),
)
"""The late-content corpus."""
