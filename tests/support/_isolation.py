"""Pages that leave state in the browser, and pages that look for it, to prove isolation.

- `/isolation/write?tag=T` sets a cookie by `Set-Cookie` (HttpOnly) and one by
  `document.cookie`, a localStorage and a sessionStorage item, an IndexedDB database, a
  CacheStorage entry and `window.name`, pushes 3 history entries and loads the cacheable
  `/isolation/cached.js?tag=T`; then it adds `<p id="written">` (also when a step failed). Its
  title is `isolation: wrote T`, or `isolation: write failed: ...`.
- `/isolation/read?tag=T` (the `tag` parameter may repeat) looks for each kind of state, then
  loads `/isolation/cached.js` for every tag and looks at whether it came from the HTTP cache
  (Resource Timing: a cached response transfers 0 bytes); then it adds `<p id="read">`. Its
  title is `isolation: clean` when it saw nothing, else `isolation: seen cookie,local,...`;
  `<pre id="report">` holds what it read, as JSON. Reading creates no state of the kinds it
  looks for (`indexedDB.databases()` and `caches.keys()` open nothing), except the HTTP cache
  entries of the scripts it loads, which a later reader must not see either.
- `/isolation/cached.js?tag=T` is cacheable for an hour; the site counts its fetches per tag
  (`_state.CACHED_FETCHES`), so a test can tell that a reader fetched it from the network.
- `/isolation/bounce?back=HOST:PORT&to=/isolation/...[&set=T]` redirects to
  `http://HOST:PORT/isolation/...`, adding a `bounced=NAME` parameter per cookie it received;
  with `set=T` it sets the cookie `iso_bounce_T` first. Reached on a second name of the site
  (`localhost` beside `127.0.0.1`), it leaves a cookie on a host no frame ever showed (a
  redirect is no navigation of a frame), and tells the reader it bounced for whether that
  host's cookies are still there. `bounce_path` builds its path.

Kinds a reader reports: `cookie` (the request carried one, or `document.cookie` shows one),
`bounce-cookie` (the bounce before it received one), `local`, `session`, `indexeddb`,
`cachestorage`, `name`, `history` (`history.length` above 2: the first `about:blank` and the
page itself), `httpcache`, `auth` (the request carried a valid Basic credential of
`/isolation/secret`), `hints` (it carried opt-in client hints); `{kind}-error` when reading
failed.
"""

from __future__ import annotations

import json
import re
from typing import Final

import _state
from _html import document, script_literal
from _isolation_net import auth_user, opt_in_hints
from aiohttp import web
from yarl import URL

TAG_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What a `tag` may be: it names cookies, storage items, databases and caches."""

BACK_PATTERN: Final = re.compile(r"[a-z0-9.-]{1,253}:[0-9]{1,5}")
"""What `back` of `/isolation/bounce` may be: `host:port`."""

CACHED_MAX_AGE_S: Final = 3600
"""Freshness of `/isolation/cached.js`: a browser that has it never asks again in a test."""

CLEAN_TITLE: Final = "isolation: clean"
"""The title of a reader that saw no state."""


def written_title(tag: str) -> str:
    """The title of a writer that set every kind of state."""
    return f"isolation: wrote {tag}"


def bounce_path(to: str, *, back: str, set_tag: str | None = None) -> str:
    """The `/isolation/bounce` path (with query) that redirects to `http://{back}{to}`,
    setting the cookie `iso_bounce_{set_tag}` on the way when `set_tag` is given."""
    query = {"back": back, "to": to} | ({"set": set_tag} if set_tag is not None else {})
    return str(URL.build(path="/isolation/bounce", query=query))


def _tags(request: web.Request) -> list[str]:
    """The `tag` parameters: at least one, each matching `TAG_PATTERN`; else a 400."""
    tags = request.query.getall("tag", [])
    if not tags or not all(TAG_PATTERN.fullmatch(tag) for tag in tags):
        raise web.HTTPBadRequest(text="tag must be given, each of 1-64 of A-Z a-z 0-9 _ -")
    return tags


def _tag(request: web.Request) -> str:
    """The one `tag` parameter, see `_tags`."""
    tags = _tags(request)
    if len(tags) > 1:
        raise web.HTTPBadRequest(text="give one tag")
    return tags[0]


def _json_value(value: object) -> str:
    """A JavaScript expression whose value is `value` (JSON), safe inside `<script>`."""
    return f"JSON.parse({script_literal(json.dumps(value))})"


WRITE_SCRIPT: Final = """
(async function () {
  const tag = __TAG__;
  const key = "isolation-" + tag;
  let outcome;
  try {
    document.cookie = "iso_js_" + tag + "=1; path=/; max-age=3600; SameSite=Lax";
    localStorage.setItem(key, tag);
    sessionStorage.setItem(key, tag);
    await new Promise((resolve, reject) => {
      const opening = indexedDB.open(key, 1);
      opening.onupgradeneeded = () => opening.result.createObjectStore("state");
      opening.onblocked = () => reject(new Error("IndexedDB open blocked"));
      opening.onerror = () => reject(opening.error);
      opening.onsuccess = () => {
        const db = opening.result;
        const tx = db.transaction("state", "readwrite");
        tx.objectStore("state").put(tag, "tag");
        tx.oncomplete = () => { db.close(); resolve(); };
        tx.onerror = () => reject(tx.error);
      };
    });
    const cache = await caches.open(key);
    await cache.put("/isolation/entry?tag=" + tag, new Response(tag));
    window.name = key;
    for (let step = 1; step <= 3; step++) history.pushState({step}, "");
    await new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = "/isolation/cached.js?tag=" + tag;
      script.onload = resolve;
      script.onerror = () => reject(new Error("cached.js did not load"));
      document.head.appendChild(script);
    });
    outcome = "wrote " + tag;
  } catch (error) {
    outcome = "write failed: " + error;
  }
  document.title = "isolation: " + outcome;
  const done = document.createElement("p");
  done.id = "written";
  done.textContent = outcome;
  document.body.appendChild(done);
})();
"""

READ_SCRIPT: Final = """
(async function () {
  const tags = __TAGS__;
  const bounced = __BOUNCED__;
  const seen = [];
  const report = {};
  async function look(kind, read, dirty) {
    try {
      const value = await read();
      report[kind] = value;
      if (dirty(value)) seen.push(kind);
    } catch (error) {
      report[kind] = "error: " + error;
      seen.push(kind + "-error");
    }
  }
  function load(url) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = resolve;
      script.onerror = () => reject(new Error(url + " did not load"));
      document.head.appendChild(script);
    });
  }
  await look("cookie", () => ({header: __SENT_COOKIES__, document: document.cookie}),
             (v) => v.header.length > 0 || v.document !== "");
  await look("bounce-cookie", () => bounced, (names) => names.length > 0);
  await look("auth", () => __SENT_AUTH__, (user) => user !== "");
  await look("hints", () => __SENT_HINTS__, (names) => names.length > 0);
  await look("local", () => localStorage.length, (n) => n > 0);
  await look("session", () => sessionStorage.length, (n) => n > 0);
  await look("indexeddb", async () => (await indexedDB.databases()).map((db) => db.name),
             (names) => names.length > 0);
  await look("cachestorage", () => caches.keys(), (names) => names.length > 0);
  await look("name", () => window.name, (name) => name !== "");
  await look("history", () => history.length, (n) => n > 2);
  await look("httpcache", async () => {
    const transferred = {};
    for (const tag of tags) {
      const url = new URL("/isolation/cached.js?tag=" + tag, location.href).href;
      await load(url);
      const [entry] = performance.getEntriesByName(url);
      // a response from the HTTP cache transfers 0 bytes; no entry at all is suspect too
      transferred[tag] = entry === undefined ? "no timing entry"
        : entry.transferSize > 0 ? "network" : "cache";
    }
    return transferred;
  }, (transferred) => Object.values(transferred).some((size) => size !== "network"));
  document.title = seen.length ? "isolation: seen " + seen.join(",") : "isolation: clean";
  document.getElementById("report").textContent = JSON.stringify(report, null, 1);
  const done = document.createElement("p");
  done.id = "read";
  done.textContent = "read";
  document.body.appendChild(done);
})();
"""


def _page(title: str, body: str, script: str) -> web.Response:
    text = document(title=title, body=f"{body}\n<script>{script}</script>")
    return web.Response(text=text, content_type="text/html", headers={"Cache-Control": "no-store"})


async def write(request: web.Request) -> web.Response:
    tag = _tag(request)
    script = WRITE_SCRIPT.replace("__TAG__", script_literal(tag))
    response = _page("isolation: writing", "<h1>Writing state</h1>", script)
    response.set_cookie(f"iso_http_{tag}", "1", max_age=CACHED_MAX_AGE_S, httponly=True)
    return response


async def read(request: web.Request) -> web.Response:
    tags = _tags(request)
    script = (
        READ_SCRIPT.replace("__TAGS__", _json_value(tags))
        .replace("__SENT_COOKIES__", _json_value(sorted(request.cookies)))
        .replace("__BOUNCED__", _json_value(request.query.getall("bounced", [])))
        .replace("__SENT_AUTH__", _json_value(auth_user(request)))
        .replace("__SENT_HINTS__", _json_value(opt_in_hints(request)))
    )
    return _page("isolation: reading", '<h1>Reading state</h1>\n<pre id="report"></pre>', script)


async def cached(request: web.Request) -> web.Response:
    tag = _tag(request)
    request.app[_state.CACHED_FETCHES][tag] += 1
    return web.Response(
        text=f"window.isolationCached = {script_literal(tag)};\n",
        content_type="text/javascript",
        headers={"Cache-Control": f"public, max-age={CACHED_MAX_AGE_S}"},
    )


async def bounce(request: web.Request) -> web.Response:
    """See the module docstring."""
    back = request.query.get("back", "")
    to = request.query.get("to", "")
    tag = request.query.get("set")
    if not BACK_PATTERN.fullmatch(back) or not to.startswith("/isolation/"):
        raise web.HTTPBadRequest(text="back must be host:port and to a path under /isolation/")
    if tag is not None and not TAG_PATTERN.fullmatch(tag):
        raise web.HTTPBadRequest(text="set must be a tag")
    target = URL(f"http://{back}{to}")
    received = [("bounced", name) for name in sorted(request.cookies)]
    target = target.with_query([*target.query.items(), *received])
    response = web.Response(
        status=302, headers={"Location": str(target), "Cache-Control": "no-store"}
    )
    if tag is not None:
        response.set_cookie(f"iso_bounce_{tag}", "1", max_age=CACHED_MAX_AGE_S)
    return response


ROUTES = (
    web.get("/isolation/write", write),
    web.get("/isolation/read", read),
    web.get("/isolation/cached.js", cached),
    web.get("/isolation/bounce", bounce),
)
"""The isolation routes."""
