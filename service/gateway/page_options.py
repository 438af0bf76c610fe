"""Firecrawl's per-page scrape options -> the contract's `CrawlOptions` fields: headers, main
content and tags, mobile, location, actions, proxy, the `json` format's selector schema,
PDF parsers. Pure: the contract then validates the values (a bad header, selector or action
is a 400 naming its Firecrawl path).

Decisions (see docs/firecrawl.md):
- `onlyMainContent` keeps Firecrawl's default, true: a Firecrawl caller gets what Firecrawl
  gives (the service's own default, off, is for Kafka producers).
- `mobile: true` is the Playwright device `Pixel 7` (an Android Chrome: the engine the
  workers run), its viewport, user agent, touch and mobile mode.
- `location.languages` sets the browser's locale (the first) and, with more than one,
  `Accept-Language` in their order; `location.country` cannot move the egress IP (no
  geolocated proxies) and is named in the document's `warning`. No time zone is guessed.
- `proxy`: `basic` and `auto` are direct fetches; `stealth` and `enhanced` are refused (no
  evasion); an `http(s)://` or `socks5://` URL or a `CRAWL_PROXIES` pool name (extensions)
  is the contract's upstream `proxy`.
- `json` with a JSON schema or a prompt needs an LLM, which the cluster does not have: a 400.
  A `schema` that is a selector schema (`{"base_selector"?, "fields": [...]}`, the contract's
  `extract`) is read without one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from service.gateway.actions import contract_actions
from service.gateway.errors import Detail, bad_request, refused

if TYPE_CHECKING:
    from collections.abc import Mapping

Path = tuple[str | int, ...]

MOBILE_DEVICE: Final = "Pixel 7"
"""The device `mobile: true` emulates."""

DIRECT_PROXIES: Final = frozenset({"basic", "auto"})
"""Firecrawl proxy modes that mean a direct fetch here."""

EVASION_PROXIES: Final = frozenset({"stealth", "enhanced"})
"""Firecrawl proxy modes that exist to get past bot protection: refused."""

JSON_SCHEMA_KEYS: Final = frozenset({"type", "properties", "$schema", "$defs", "items"})
"""Keys that mark a `schema` as a JSON Schema (for an LLM) rather than a selector schema."""

PDF_PARSER_KEYS: Final = frozenset({"type", "mode"})
"""Keys of a `{"type": "pdf"}` parser the cluster honours."""


def contract_fields(
    options: Mapping[str, Any], path: Path, *, json_schema: object = None
) -> dict[str, Any]:
    """The `CrawlOptions` fields the options ask for (only those set)."""
    fields: dict[str, Any] = {
        "only_main_content": _bool(options, "onlyMainContent", path, default=True)
    }
    headers = _headers(options.get("headers"), (*path, "headers"))
    for key, name in (("includeTags", "include_tags"), ("excludeTags", "exclude_tags")):
        tags = _strings(options.get(key), (*path, key))
        if tags:
            fields[name] = tags
    if _bool(options, "mobile", path, default=False):
        fields["device"] = MOBILE_DEVICE
    languages = _languages(options.get("location"), (*path, "location"))
    if languages:
        fields["locale"] = languages[0]
        if len(languages) > 1 and not any(k.lower() == "accept-language" for k in headers):
            headers["Accept-Language"] = accept_language(languages)
    if headers:
        fields["headers"] = headers
    actions = contract_actions(options.get("actions"), (*path, "actions"))
    if actions:
        fields["actions"] = actions
    proxy = _proxy(options.get("proxy"), (*path, "proxy"))
    if proxy is not None:
        fields["proxy"] = proxy
    if json_schema is not None:
        fields["extract"] = json_schema
    _parsers(options.get("parsers"), (*path, "parsers"))
    return fields


def country_of(options: Mapping[str, Any]) -> str | None:
    """`location.country`, when one is given (it is not applied: see the module)."""
    location = options.get("location")
    country = location.get("country") if isinstance(location, dict) else None
    return country if isinstance(country, str) and country else None


def accept_language(languages: list[str]) -> str:
    """`de-DE, en;q=0.9, ...`: the languages in order of preference."""
    weighted = [languages[0]]
    weighted += [f"{tag};q={max(1, 10 - n) / 10:.1f}" for n, tag in enumerate(languages[1:], 1)]
    return ",".join(weighted)


def selector_schema(item: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The selector schema of a `{"type": "json", ...}` format, or a 400 saying why not."""
    extra = sorted(set(item) - {"type", "schema", "prompt"})
    if extra:
        raise bad_request(Detail(path=(*path, extra[0]), message="unrecognized key"))
    if item.get("prompt"):
        raise refused(
            (*path, "prompt"),
            "json: no LLM on this cluster, a prompt cannot be honoured; give a selector schema "
            '`{"base_selector": ..., "fields": [{"name", "selector", "type"}]}` as `schema`',
        )
    schema = item.get("schema")
    if not isinstance(schema, dict) or "fields" not in schema or JSON_SCHEMA_KEYS & set(schema):
        raise refused(
            (*path, "schema"),
            "json: no LLM on this cluster, a JSON Schema cannot be filled; give a selector schema "
            '`{"base_selector": ..., "fields": [{"name", "selector", "type"}]}` instead',
        )
    return schema


def _bool(options: Mapping[str, Any], key: str, path: Path, *, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise bad_request(Detail(path=(*path, key), message="a boolean is expected"))
    return value


def _headers(value: object, path: Path) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise bad_request(Detail(path=path, message="an object of header names to strings"))
    return dict(value)


def _strings(value: object, path: Path) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise bad_request(Detail(path=path, message="a list of strings is expected"))
    return value


def _languages(value: object, path: Path) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, dict):
        raise bad_request(Detail(path=path, message="an object {country, languages}"))
    extra = sorted(set(value) - {"country", "languages"})
    if extra:
        raise bad_request(Detail(path=(*path, extra[0]), message="unrecognized key"))
    country = value.get("country")
    if country is not None and not isinstance(country, str):
        raise bad_request(Detail(path=(*path, "country"), message="a country code is expected"))
    return _strings(value.get("languages"), (*path, "languages"))


def _proxy(value: object, path: Path) -> str | None:
    if value is None or value in DIRECT_PROXIES:
        return None
    if value in EVASION_PROXIES:
        raise refused(
            path,
            f"{value!r} cannot be honoured: no stealth or bot-protection evasion on this "
            "cluster (use basic or auto, or an upstream proxy URL or pool name)",
        )
    if not isinstance(value, str):
        raise bad_request(Detail(path=path, message="basic, auto, a proxy URL or a pool name"))
    return value


def _parsers(value: object, path: Path) -> None:
    """PDFs are always parsed (text of their pages, up to `CRAWL_MAX_PDF_PAGES`): `parsers`
    may name `pdf` (mode `fast` or `auto`); anything else asks for what is not done."""
    if value is None:
        return
    if not isinstance(value, list):
        raise bad_request(Detail(path=path, message="a list of parsers is expected"))
    if not value:
        raise refused(path, "PDFs are always parsed here: an empty list cannot be honoured")
    for index, parser in enumerate(value):
        at = (*path, index)
        kind = parser.get("type") if isinstance(parser, dict) else parser
        if kind == "image":
            raise refused(at, "images are not parsed (no OCR on this cluster)")
        if kind != "pdf":
            raise bad_request(Detail(path=at, message="`pdf` or {type: pdf, ...} is expected"))
        if not isinstance(parser, dict):
            continue
        extra = sorted(set(parser) - PDF_PARSER_KEYS)
        if extra:
            why = (
                "pages are capped by the cluster's CRAWL_MAX_PDF_PAGES"
                if extra[0] == "maxPages"
                else "not supported"
            )
            raise refused((*at, extra[0]), f"{extra[0]} cannot be honoured: {why}")
        if parser.get("mode", "auto") not in {"auto", "fast"}:
            raise refused((*at, "mode"), "only the text layer is read (no OCR): fast or auto")
