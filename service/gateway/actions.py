"""Firecrawl's page `actions` (camelCase types and keys) -> the contract's snake_case steps, and
the result's `actions` output -> Firecrawl's document shape. Pure.

An action type or key the cluster has no honest equivalent for is a 400 naming it; the
contract's `Actions` then checks the values (`milliseconds` range, exactly one of the two
waits, at most 50 steps)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from service.gateway.errors import Detail, bad_request, refused

if TYPE_CHECKING:
    from service.contracts_actions import ActionsOutput

Path = tuple[str | int, ...]

ACTION_KEYS: Final[dict[str, tuple[str, dict[str, str]]]] = {
    "wait": ("wait", {"milliseconds": "milliseconds", "selector": "selector"}),
    "click": ("click", {"selector": "selector", "all": "all"}),
    # Firecrawl's `write` types into the focused element; `selector` is an extension (the
    # contract fills that field instead).
    "write": ("write", {"text": "text", "selector": "selector"}),
    "press": ("press", {"key": "key"}),
    # `amount` (pixels), `untilIdle` and `maxSteps` (infinite scroll) are extensions.
    "scroll": (
        "scroll",
        {
            "direction": "direction",
            "amount": "amount",
            "untilIdle": "until_idle",
            "maxSteps": "max_steps",
        },
    ),
    "executeJavascript": ("execute_javascript", {"script": "script"}),
    "screenshot": ("screenshot", {"fullPage": "full_page"}),
}
"""Each Firecrawl action type: the contract's type and its keys, Firecrawl's -> the contract's."""

REFUSED_ACTIONS: Final[dict[str, str]] = {
    "scrape": "no mid-action snapshots: the page is read once, after the last action",
    "pdf": "no PDF action: ask for the `pdf` format (printed after the actions)",
}

REFUSED_KEYS: Final[dict[tuple[str, str], str]] = {
    ("scroll", "selector"): "only the page scrolls, not an element",
    ("screenshot", "quality"): "screenshots are PNG (no quality setting)",
    ("screenshot", "viewport"): "no per-screenshot viewport: set the page's instead",
}


def contract_actions(value: object, path: Path) -> list[dict[str, Any]]:
    """Firecrawl's `actions` as the contract's steps (in order)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request(Detail(path=path, message="a list of actions is expected"))
    return [_action(item, (*path, index)) for index, item in enumerate(value)]


def _action(item: object, path: Path) -> dict[str, Any]:
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        raise bad_request(Detail(path=path, message="an object with a `type` is expected"))
    kind: str = item["type"]
    if kind in REFUSED_ACTIONS:
        raise refused((*path, "type"), f"action {kind!r} is not supported: {REFUSED_ACTIONS[kind]}")
    if kind not in ACTION_KEYS:
        known = ", ".join(ACTION_KEYS)
        raise refused((*path, "type"), f"unknown action {kind!r} (supported: {known})")
    contract_type, keys = ACTION_KEYS[kind]
    step: dict[str, Any] = {"type": contract_type}
    for key, value in item.items():
        if key == "type" or value is None:
            continue
        why = REFUSED_KEYS.get((kind, key))
        if why is not None:
            raise refused((*path, key), f"{kind}.{key} cannot be honoured: {why}")
        if key not in keys:
            raise bad_request(Detail(path=(*path, key), message=f"unrecognized key of {kind}"))
        step[keys[key]] = value
    return step


def document_actions(output: ActionsOutput, screenshot_prefix: str) -> dict[str, Any]:
    """Firecrawl's `actions` of a document: `screenshots` (data URLs, as the self-hosted
    Firecrawl gives them), `scrapes` (always empty here) and `javascriptReturns`
    (`{type, value}`, `type` as JavaScript's `typeof` names the value)."""
    return {
        "screenshots": [screenshot_prefix + shot for shot in output.screenshots],
        "scrapes": [],
        "javascriptReturns": [{"type": _js_type(v), "value": v} for v in output.returns],
        "pdfs": [],
    }


def _js_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"  # lists, objects and null (`typeof null` is "object")
