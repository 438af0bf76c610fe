"""Firecrawl's scrape options (the body of `/v2/scrape`, `scrapeOptions` of a crawl, the top
level of a batch): which are mapped, which are accepted at the values the SDKs send, which
are refused. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from service.contracts import Format
from service.gateway.change_tracking import NAME as CHANGE_TRACKING
from service.gateway.change_tracking import contract_tracking
from service.gateway.errors import Detail, bad_request, refused
from service.gateway.page_options import country_of, selector_schema

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

Path = tuple[str | int, ...]

FORMATS: Final[dict[str, Format | None]] = {
    "markdown": Format.MARKDOWN,
    "html": Format.HTML,
    "rawHtml": Format.HTML,
    "links": Format.LINKS,
    "screenshot": Format.SCREENSHOT,
    "json": None,  # with a selector schema only: the contract's `extract`, no format
    "structuredData": Format.STRUCTURED_DATA,  # an extension: JSON-LD, microdata, Open Graph
    "pdf": Format.PDF,  # an extension: the rendered page printed to PDF
    CHANGE_TRACKING: None,  # the contract's `change_tracking`, no format
}
"""Firecrawl formats the cluster produces, and the contract format each comes from."""

DEFAULT_FORMATS: Final = ("markdown",)
"""Firecrawl's formats when a request names none."""

SCREENSHOT_KEYS: Final = frozenset({"type", "fullPage"})
"""Keys of a `{"type": "screenshot", ...}` format the cluster honours."""

DEFAULT_MAX_AGE_MS: Final = 2 * 24 * 3600 * 1000
"""Firecrawl's `maxAge` when a request gives none: an answer from the page cache up to two
days old (docs/cache.md)."""

MIN_TIMEOUT_MS: Final = 1000
MAX_TIMEOUT_MS: Final = 300_000
"""A page's `timeout` range (Firecrawl's own ceiling: 5 minutes)."""

MAX_INT64: Final = 2**63 - 1

NOT_APPLIED: Final = ("blockAds",)
"""Options the SDKs send by default that the cluster accepts without applying them; a
document names them in its `warning` when they are on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrapeChoices:
    """What the caller asked of each page, in Firecrawl's terms."""

    formats: tuple[str, ...]
    """Firecrawl format names, in the order given (`markdown`, `html`, `rawHtml`, ...)."""
    full_page: bool = False
    timeout_ms: int | None = None
    remove_base64_images: bool = True
    warning: str | None = None
    json_schema: dict[str, Any] | None = None
    """The selector schema of a `json` format (the contract's `extract`); not persisted."""
    change_tracking: dict[str, Any] | None = None
    """The contract's `change_tracking` of a `changeTracking` format; not persisted."""
    min_age_ms: int | None = None
    """`minAge`: a cache-only read whose entry must be at least this old."""
    lockdown: bool = False
    """`lockdown`: a cache-only read; a miss is Firecrawl's `SCRAPE_LOCKDOWN_CACHE_MISS`."""

    @property
    def cache_only(self) -> bool:
        return self.lockdown or self.min_age_ms is not None

    @property
    def contract_formats(self) -> set[Format]:
        return {f for name in self.formats if (f := FORMATS[name]) is not None}


def _is_false(value: object) -> bool:
    return value in (None, False)


def _is_empty(value: object) -> bool:
    return value in (None, [], {}, "")


def _is_zero(value: object) -> bool:
    return value in (None, 0)


def _any(_: object) -> bool:
    return True


def _is_bool(value: object) -> bool:
    return value is None or isinstance(value, bool)


def _is_count(value: object) -> bool:
    return value is None or (
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT64
    )


_ACCEPTED: Final[dict[str, tuple[Callable[[object], bool], str]]] = {
    "onlyMainContent": (_is_bool, "a boolean is expected"),
    "blockAds": (_is_bool, "a boolean is expected"),
    # the page cache: mapped by `cache_fields`
    "maxAge": (_is_count, "milliseconds, a non-negative integer"),
    "minAge": (_is_count, "milliseconds, a non-negative integer"),
    "storeInCache": (_is_bool, "a boolean is expected"),
    "lockdown": (_is_bool, "a boolean is expected"),
    "removeBase64Images": (_is_bool, "a boolean is expected"),
    "timeout": (_any, ""),
    "formats": (_any, ""),
    # mapped by `page_options.contract_fields`, which checks their values:
    "headers": (_any, ""),
    "includeTags": (_any, ""),
    "excludeTags": (_any, ""),
    "mobile": (_any, ""),
    "location": (_any, ""),
    "actions": (_any, ""),
    "proxy": (_any, ""),
    "parsers": (_any, ""),
    "fastMode": (_is_false, "no fast mode"),
    # the SDKs send `true` by default: passed on where CRAWL_ALLOW_INSECURE_TLS allows it,
    # else named in the `warning` (certificates verified all the same)
    "skipTlsVerification": (_is_bool, "a boolean is expected"),
    "checkPromptInjection": (_is_false, "no LLM checks on this cluster"),
    "redactPII": (_is_false, "no PII redaction on this cluster"),
    "domainTools": (_is_false, "not supported"),
    "waitFor": (_is_zero, "no fixed delay: the worker waits for the page to settle itself"),
    "useMock": (_is_empty, "not supported"),
    "threatProtection": (_is_empty, "not supported"),
    "profile": (_is_empty, "not supported"),
    "toolDetail": (_is_empty, "not supported"),
}
"""Each scrape option, with the test its value must pass and why otherwise it is refused."""


def scrape_choices(
    options: Mapping[str, Any], path: Path, *, allow_insecure_tls: bool = False
) -> ScrapeChoices:
    """Check every option (400 naming the first one refused) and collect what is asked
    (`allow_insecure_tls`: `skipTlsVerification` is applied, so no warning names it)."""
    for key, value in options.items():
        rule = _ACCEPTED.get(key)
        if rule is None:
            raise bad_request(Detail(path=(*path, key), message="unrecognized key"))
        ok, why = rule
        if not ok(value):
            raise refused((*path, key), f"{value!r} cannot be honoured: {why}")
    formats, full_page, json_schema = _formats(options.get("formats"), (*path, "formats"))
    return ScrapeChoices(
        change_tracking=_tracking(options.get("formats"), (*path, "formats")),
        formats=formats,
        full_page=full_page,
        timeout_ms=_timeout(options.get("timeout"), (*path, "timeout")),
        remove_base64_images=options.get("removeBase64Images", True) is not False,
        warning=_warning(options, allow_insecure_tls=allow_insecure_tls),
        json_schema=json_schema,
        min_age_ms=_milliseconds(options.get("minAge"), (*path, "minAge")),
        lockdown=options.get("lockdown") is True,
    )


def cache_fields(options: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The `CrawlOptions` page-cache fields of Firecrawl's `maxAge`, `minAge`, `storeInCache`
    and `lockdown`. `minAge` reads the cache only, whatever the entry's age beyond it (the
    gateway checks the minimum); `lockdown` reads it only within `maxAge`."""
    max_age = _milliseconds(options.get("maxAge"), (*path, "maxAge"))
    fields: dict[str, Any] = {
        "max_age_ms": DEFAULT_MAX_AGE_MS if max_age is None else max_age,
        "store_in_cache": options.get("storeInCache") is not False,
    }
    if options.get("minAge") is not None:
        fields |= {"cache_only": True, "max_age_ms": 0}
    elif options.get("lockdown") is True:
        fields["cache_only"] = True
    return fields


def _milliseconds(value: object, path: Path) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad_request(Detail(path=path, message="a whole number of milliseconds >= 0"))
    return value


def _warning(options: Mapping[str, Any], *, allow_insecure_tls: bool) -> str | None:
    notes = []
    if any(options.get(key) is True for key in NOT_APPLIED):
        notes.append("blockAds (no ad blocking)")
    if options.get("skipTlsVerification") is True and not allow_insecure_tls:
        notes.append("skipTlsVerification (certificates are verified: insecure TLS not allowed)")
    country = country_of(options)
    if country is not None:
        notes.append(
            f"location.country {country!r} (no geolocated egress: pages are fetched "
            "from the cluster's own network; only location.languages is applied)"
        )
    return f"not applied by this cluster: {'; '.join(notes)}" if notes else None


def _timeout(value: object, path: Path) -> int | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_TIMEOUT_MS <= value <= MAX_TIMEOUT_MS
    ):
        raise bad_request(
            Detail(path=path, message=f"milliseconds, from {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS}")
        )
    return value


def _formats(value: object, path: Path) -> tuple[tuple[str, ...], bool, dict[str, Any] | None]:
    if value is None:
        return DEFAULT_FORMATS, False, None
    if not isinstance(value, list):
        raise bad_request(Detail(path=path, message="a list of formats is expected"))
    names: list[str] = []
    full_page = False
    json_schema: dict[str, Any] | None = None
    for index, item in enumerate(value):
        name, full = _format(item, (*path, index))
        if name == "json":
            if not isinstance(item, dict):
                raise bad_request(
                    Detail(path=(*path, index), message="json must be an object with a schema")
                )
            json_schema = selector_schema(item, (*path, index))
        names.append(name)
        full_page = full_page or full
    return tuple(dict.fromkeys(names)), full_page, json_schema


def _tracking(value: object, path: Path) -> dict[str, Any] | None:
    """The contract's `change_tracking` when the formats name `changeTracking`."""
    for index, item in enumerate(value if isinstance(value, list) else []):
        name = item.get("type") if isinstance(item, dict) else item
        if name == CHANGE_TRACKING:
            return contract_tracking(item, (*path, index))
    return None


def _format(item: object, path: Path) -> tuple[str, bool]:
    if isinstance(item, dict):
        name = item.get("type")
        extra = set(item) - SCREENSHOT_KEYS
        if name == "screenshot" and extra:
            raise refused((*path, min(extra)), "only fullPage is supported for screenshots")
        full = item.get("fullPage", False)
        if not isinstance(full, bool):
            raise bad_request(Detail(path=(*path, "fullPage"), message="a boolean is expected"))
    else:
        name, full = item, False
    if not isinstance(name, str):
        raise bad_request(Detail(path=path, message="a format name or object is expected"))
    if name not in FORMATS:
        raise refused(path, f"format {name!r} is not produced by this cluster")
    return name, full
