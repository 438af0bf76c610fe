"""Does a page's static HTML need its scripts to show its content? Pure: one HTML string in.

`shell_reason` is the `auto` path's result check (Crawlee's adaptive crawler calls it the
"result checker"; there the user writes it, here it is built in). It errs towards the
browser: a static page sent to the browser costs time, an app shell returned as success is
a wrong answer. A page without an executable script is never a shell (the browser would
show the same document); otherwise, in this order:

- `noscript`: a `<noscript>` asks the reader to enable JavaScript, and the page has little
  text besides (a comment widget's notice under a long article does not count);
- `empty_root`: a framework mount point (`#root`, `#app`, `#__next`, `<app-root>`, ...) is
  empty: its content is rendered by script;
- `empty_main`: the page has a main landmark (`<main>`, `role=main`) and every one is empty:
  boilerplate around a body that scripts fill in;
- `thin_text`: the visible text is short (under `RICH_TEXT_CHARS`) and no longer than the
  page's scripts (inline code, plus `EXTERNAL_SCRIPT_CHARS` per external script).

`rendered_shell_reason` is the same check for a document the browser has run the scripts of.
Only the signals that still mean "not rendered yet" there apply: an empty mount point or main
landmark on a page with little text. A `<noscript>` notice stays in a rendered page (Create
React App ships one), and a short page with large scripts is simply short.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from selectolax.lexbor import LexborHTMLParser, SelectolaxError

from service.content.guard import MAX_PARSE_WORK, parse_work
from service.content.readable import INVISIBLE_TAGS

if TYPE_CHECKING:
    from selectolax.lexbor import LexborNode

ShellReason = Literal["noscript", "empty_root", "empty_main", "thin_text"]

RICH_TEXT_CHARS: Final = 2000
"""Visible characters from which a page counts as carrying its content in the static HTML
(unless a mount point or its main landmark is empty)."""

EMPTY_TEXT_CHARS: Final = 40
"""An element with at most this much text is empty ("Loading..." placeholders included)."""

EXTERNAL_SCRIPT_CHARS: Final = 1000
"""What one `<script src>` weighs against the visible text (its size is unknown here)."""

MOUNT_SELECTOR: Final = ", ".join(
    [
        *(f"#{name}" for name in ("root", "app", "__next", "__nuxt", "___gatsby", "svelte")),
        "#react-root",
        "#app-root",
        "#spa-root",
        "app-root",
        "[data-reactroot]",
    ]
)
"""Elements single-page-app frameworks render into (React, Vue, Next, Nuxt, Gatsby, Svelte,
Angular): empty in the static HTML when the page is rendered in the browser."""

MAIN_SELECTOR: Final = "main, [role=main]"

JS_TYPES: Final = frozenset(
    {"", "module", "text/javascript", "application/javascript", "text/ecmascript"}
)
"""`<script type>` values a browser executes (JSON data blocks and templates are not code)."""

NOSCRIPT_PHRASES: Final = (
    "enable javascript",
    "enable js",
    "javascript is required",
    "javascript is disabled",
    "javascript is not enabled",
    "javascript must be enabled",
    "requires javascript",
    "need javascript",
    "needs javascript",
    "turn on javascript",
    "activate javascript",
    "without javascript",
)
"""Lower-case phrases of a `<noscript>` that tells the reader the page needs JavaScript."""


def shell_reason(html: str) -> ShellReason | None:  # noqa: PLR0911 (one return per signal)
    """Why the static `html` is not the page a browser would show (None: it is, or it is too
    complex to parse, which extraction reports as `too_large` on either path)."""
    if parse_work(html) > MAX_PARSE_WORK:
        return None
    tree = LexborHTMLParser(html)
    script_chars = _script_weight(tree)
    if script_chars is None:
        return None
    noscript = any(_asks_for_javascript(node) for node in tree.css("noscript"))
    tree.strip_tags(list(INVISIBLE_TAGS))  # from here on, text is what a reader sees
    empty_root = any(_is_empty(node) for node in tree.css(MOUNT_SELECTOR))
    mains = tree.css(MAIN_SELECTOR)
    empty_main = bool(mains) and all(_is_empty(node) for node in mains)
    text_chars = len(_text(tree.body)) if tree.body is not None else 0
    if noscript and text_chars < RICH_TEXT_CHARS:
        return "noscript"
    if empty_root:
        return "empty_root"
    if empty_main:
        return "empty_main"
    if text_chars < RICH_TEXT_CHARS and text_chars <= script_chars:
        return "thin_text"
    return None


def rendered_shell_reason(html: str) -> ShellReason | None:
    """Why the rendered document `html` is still an app shell: an empty framework mount
    point or main landmark, and less visible text than `RICH_TEXT_CHARS` (None: it is not, or
    it is too complex to parse)."""
    if parse_work(html) > MAX_PARSE_WORK:
        return None
    tree = LexborHTMLParser(html)
    tree.strip_tags(list(INVISIBLE_TAGS))
    if tree.body is None or len(_text(tree.body)) >= RICH_TEXT_CHARS:
        return None
    if any(_is_empty(node) for node in tree.css(MOUNT_SELECTOR)):
        return "empty_root"
    mains = tree.css(MAIN_SELECTOR)
    if mains and all(_is_empty(node) for node in mains):
        return "empty_main"
    return None


def selector_present(html: str, selector: str) -> bool | None:
    """Whether CSS `selector` matches in the static `html`; None when selectolax cannot parse
    it (Playwright's own engines such as `text=`, or a syntax error: the browser decides)."""
    try:
        return LexborHTMLParser(html).css_first(selector) is not None
    except SelectolaxError:
        return None


def _script_weight(tree: LexborHTMLParser) -> int | None:
    """Characters of executable script in the page; None when it has none."""
    weight, found = 0, False
    for node in tree.css("script"):
        kind = (node.attributes.get("type") or "").strip().lower()
        if kind not in JS_TYPES:
            continue
        found = True
        has_src = bool(node.attributes.get("src"))
        weight += EXTERNAL_SCRIPT_CHARS if has_src else len(node.text(deep=True).strip())
    return weight if found else None


def _asks_for_javascript(node: LexborNode) -> bool:
    text = " ".join(node.text(deep=True).lower().split())
    return any(phrase in text for phrase in NOSCRIPT_PHRASES)


def _is_empty(node: LexborNode) -> bool:
    return len(_text(node)) <= EMPTY_TEXT_CHARS


def _text(node: LexborNode) -> str:
    return " ".join(node.text(deep=True).split())
