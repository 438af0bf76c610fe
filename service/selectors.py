"""CSS selectors as the content side applies them: parsed by lexbor (selectolax), the engine
that runs them, so a selector accepted at intake is one extraction can apply."""

from __future__ import annotations

from functools import lru_cache
from typing import Final

from selectolax.lexbor import LexborHTMLParser, SelectolaxError

MAX_SELECTOR_CHARS: Final = 1024
"""Longest selector accepted in `include_tags`, `exclude_tags`, an `extract` schema,
`wait_for` or an action's `selector`."""


@lru_cache(maxsize=1024)
def css_problem(selector: str) -> str | None:
    """Why `selector` is not a CSS selector lexbor can apply; None when it is."""
    if not selector.strip():
        return "an empty selector"
    try:
        LexborHTMLParser("").css_first(selector)  # a parser per call: threads may judge too
    except SelectolaxError as exc:
        return str(exc).rstrip(".")
    return None
