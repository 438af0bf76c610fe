"""A record's value without its credentials, for copies that outlive the record's purpose (a
dead letter). What counts, in a request (`options`, `metadata`) or a page task (`options`,
`request_metadata`): page header values, cookie values, the user info of a proxy URL, and a
webhook's header values and its URL's user info, query and fragment. Pure, standard library
only; a value that is no JSON object is returned as it is (it has no such fields)."""

from __future__ import annotations

import json
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

REDACTED: Final = "[redacted]"
"""What a redacted value reads (the gateway's echo shows the same)."""

_OPTIONS: Final = "options"
_METADATA_KEYS: Final = ("metadata", "request_metadata")
_WEBHOOK: Final = "webhook"


def redacted(value: bytes) -> tuple[bytes, list[str]]:
    """`value` with its credentials replaced by `[redacted]`, and the fields that were; the
    same bytes and `[]` when there is nothing to redact (or `value` is no JSON object)."""
    try:
        document = json.loads(value)
    except (ValueError, RecursionError):
        return value, []
    if not isinstance(document, dict):
        return value, []
    fields: list[str] = []
    options = document.get(_OPTIONS)
    if isinstance(options, dict):
        fields += [f"{_OPTIONS}.{name}" for name in _redact_options(options)]
    for key in _METADATA_KEYS:
        metadata = document.get(key)
        if isinstance(metadata, dict) and _WEBHOOK in metadata:
            hook, changed = _redact_webhook(metadata[_WEBHOOK])
            if changed:
                metadata[_WEBHOOK] = hook
                fields.append(f"{key}.{_WEBHOOK}")
    if not fields:
        return value, []
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode(), fields


def _redact_options(options: dict[str, Any]) -> list[str]:
    """Redact `options` in place; the names of the fields redacted."""
    done: list[str] = []
    headers = options.get("headers")
    if isinstance(headers, dict) and headers:
        options["headers"] = dict.fromkeys(headers, REDACTED)
        done.append("headers")
    cookies = options.get("cookies")
    if isinstance(cookies, list) and cookies:
        options["cookies"] = [
            c | {"value": REDACTED} if isinstance(c, dict) and "value" in c else c for c in cookies
        ]
        done.append("cookies")
    proxy = options.get("proxy")
    if isinstance(proxy, str):
        shown = without_user_info(proxy)
        if shown != proxy:
            options["proxy"] = shown
            done.append("proxy")
    return done


def _redact_webhook(hook: object) -> tuple[object, bool]:
    if isinstance(hook, str):
        shown = without_secrets(hook)
        return shown, shown != hook
    if not isinstance(hook, dict):
        return hook, False
    changed = dict(hook)
    if isinstance(hook.get("headers"), dict) and hook["headers"]:
        changed["headers"] = dict.fromkeys(hook["headers"], REDACTED)
    if isinstance(hook.get("url"), str):
        changed["url"] = without_secrets(hook["url"])
    return changed, changed != hook


def without_user_info(url: str) -> str:
    """`url` with `[redacted]` for its user info (`scheme://[redacted]@host:port`)."""
    return _shown(url, keep_query=True)


def without_secrets(url: str) -> str:
    """`url` with `[redacted]` for its user info, query and fragment (a webhook's token)."""
    return _shown(url, keep_query=False)


def _shown(url: str, *, keep_query: bool) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query, fragment = parts.query, parts.fragment
    if not keep_query:
        query = REDACTED if query else ""
        fragment = REDACTED if fragment else ""
    shown = urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    return url if shown == urlunsplit(parts) else shown
