"""Reading the fields of a Firecrawl body: each bad value is a 400 naming its path. Pure."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from pydantic import ValidationError

from service.contracts import MAX_URL_LENGTH
from service.gateway.errors import Detail, bad_request, refused

if TYPE_CHECKING:
    from collections.abc import Mapping

Path = tuple[str | int, ...]

CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
"""Control characters a URL may not carry (raw; percent-encoded they are fine)."""

COMMON_KEYS: Final = frozenset({"origin", "integration", "auditMetadata"})
"""Keys every body may carry that change nothing (bookkeeping of the caller)."""


def validated(
    model: type[Any], fields: dict[str, Any], path: Path, context: dict[str, Any] | None = None
) -> Any:  # noqa: ANN401 - the model's own type
    """`fields` as `model`, validated strictly as JSON (Firecrawl's schemas take no `"5"` for
    a number nor `"yes"` for a boolean); every problem a 400 naming its Firecrawl path."""
    try:
        raw = json.dumps(fields, allow_nan=False)
    except ValueError:
        raise bad_request(
            Detail(path=path or ("body",), message="numbers must be finite")
        ) from None
    try:
        return model.model_validate_json(raw, strict=True, context=context)
    except ValidationError as exc:
        details = [
            Detail(path=(*path, *_firecrawl_name(error["loc"])), message=error["msg"])
            for error in exc.errors()
        ]
        raise bad_request(*details) from None


_CONTRACT_NAMES: Final = {
    "max_pages": "limit",
    "max_depth": "maxDiscoveryDepth",
    "include": "includePaths",
    "exclude": "excludePaths",
    "delay_ms": "delay",
    "timeout_ms": "timeout",
    "include_tags": "includeTags",
    "exclude_tags": "excludeTags",
    "only_main_content": "onlyMainContent",
    "extract": "formats.json.schema",
    "locale": "location.languages",
    "device": "mobile",
}


def _firecrawl_name(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    if not loc:
        return loc
    head = _CONTRACT_NAMES.get(str(loc[0]))
    return loc if head is None else (*head.split("."), *loc[1:])


def split_urls(urls: list[str], *, most: int | None = None) -> tuple[list[str], list[str]]:
    """The distinct http(s) URLs and the others; with `most`, the reading stops at the
    first good URL past `most` distinct ones (a list that long is refused whatever follows)."""
    good: dict[str, None] = {}
    bad: list[str] = []
    for url in urls:
        if not is_http(url):
            bad.append(url)
            continue
        good[url] = None
        if most is not None and len(good) > most:
            break
    return list(good), bad


def is_http(url: str) -> bool:
    """An absolute http(s) URL the contract takes: a host, a valid port, no control
    characters, no whitespace in the authority, at most `MAX_URL_LENGTH` characters."""
    url = url.strip()
    if len(url) > MAX_URL_LENGTH or CONTROL.search(url):
        return False
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number in range raises here
    except ValueError:  # a broken IPv6 literal, a bad port
        return False
    if any(c.isspace() for c in parts.netloc):
        return False
    return parts.scheme.lower() in {"http", "https"} and bool(parts.hostname)


def url_of(value: object, path: Path) -> str:
    if not isinstance(value, str) or not is_http(value):
        raise bad_request(Detail(path=path, message="an absolute http(s) URL is required"))
    return value.strip()


def refuse_unknown(body: Mapping[str, Any], known: frozenset[str], path: Path) -> None:
    extra = sorted(set(body) - known)
    if extra:
        details = [Detail(path=(*path, key), message="unrecognized key") for key in extra]
        raise bad_request(*details)


def refuse_set(body: Mapping[str, Any], keys: tuple[str, ...], path: Path) -> None:
    for key in keys:
        if body.get(key) not in (None, "", [], {}):
            raise refused((*path, key), "not supported by this gateway")


def mapping_of(value: object, path: Path) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(Detail(path=path, message="an object is expected"))
    return value


def bool_of(body: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(Detail(path=(key,), message="a boolean is expected"))
    return value


def int_of(body: Mapping[str, Any], key: str, *, default: int, low: int) -> int:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise bad_request(Detail(path=(key,), message=f"an integer of at least {low} is expected"))
    return value


def strings_of(body: Mapping[str, Any], key: str) -> list[str]:
    value = body.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise bad_request(Detail(path=(key,), message="a list of strings is expected"))
    return value
